// The sandbox's Service routing (src/sandbox/services.ts): one address as before, or several endpoints
// spread round-robin, each used only while its readiness URL answers 200 (polled).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceRoutes } from '../../../src/sandbox/services.ts';
import { eventually } from '../../helpers/eventually.ts';

let probe: Server;
const readiness = new Map<string, number>([
  ['/a', 200],
  ['/b', 200],
]);
let base: string;

beforeAll(async () => {
  probe = createServer((req, res) => res.writeHead(readiness.get(req.url ?? '') ?? 404).end());
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(probe.address() as AddressInfo).port}`;
});
afterAll(async () => {
  probe.closeAllConnections();
  await new Promise((resolve) => probe.close(resolve));
});

describe('ServiceRoutes', () => {
  it('routes a single address, always ready, until unmapped', () => {
    const routes = new ServiceRoutes();
    expect(routes.resolve('ns', 'svc')).toBeUndefined();
    routes.map('ns', 'svc', { host: '127.0.0.1', port: 9443 });
    expect(routes.resolve('ns', 'svc')).toEqual({ host: '127.0.0.1', port: 9443 });
    expect(routes.resolve('ns', 'other')).toBeUndefined();
    routes.unmap('ns', 'svc');
    expect(routes.resolve('ns', 'svc')).toBeUndefined();
    routes.stop();
  });

  it('spreads calls over the ready endpoints and drops one whose readiness fails', async () => {
    const routes = new ServiceRoutes();
    try {
      routes.map('ns', 'svc', [
        { host: '127.0.0.1', port: 1, readinessUrl: `${base}/a` },
        { host: '127.0.0.1', port: 2, readinessUrl: `${base}/b` },
      ]);
      // Both are used once their probes pass; calls alternate between them.
      await eventually(() => {
        const ports = new Set([1, 2, 3, 4].map(() => routes.resolve('ns', 'svc')?.port));
        return ports.size === 2 && ports.has(1) && ports.has(2);
      });
      readiness.set('/b', 500);
      await eventually(() => [1, 2, 3, 4].every(() => routes.resolve('ns', 'svc')?.port === 1));
      readiness.set('/a', 503);
      await eventually(() => routes.resolve('ns', 'svc') === undefined);
      readiness.set('/b', 200);
      await eventually(() => routes.resolve('ns', 'svc')?.port === 2);
    } finally {
      routes.stop();
    }
  });
});
