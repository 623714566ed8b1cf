// The operator as the image ships it (Dockerfile): `scripts/build.ts` compiles src/, webhooks/ and certs/ to
// JavaScript. The compiled tree must be complete on its own (every relative import and every file it reads
// inside it) and must run: with the image's environment and the install's NODE_OPTIONS (a V8 heap sized
// from the container's memory limit), the built operator serves admission and holds a lease, as the
// TypeScript sources do in every other test.
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, checkOutDir, OutDirError } from '../../../scripts/build.ts';
import { type CentralServer, startCentralServer } from '../../../src/central/server.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { centralTls } from '../../helpers/central-tls.ts';
import { eventually } from '../../helpers/eventually.ts';
import { shippedEnv } from '../../helpers/image.ts';
import { stopOperatorProcesses } from '../../helpers/operator-process.ts';
import { OperatorCluster } from '../reliability/operator-cluster.ts';

// Inside the checkout (build/ is ignored), so that the compiled files find node_modules as in the image.
const OUT = join(process.cwd(), 'build', `test-${process.pid}`);
let main: string;
let cluster: OperatorCluster;
let central: CentralServer;

beforeAll(async () => {
  main = build(OUT);
  cluster = await OperatorCluster.start();
  central = await startCentralServer({
    tls: await centralTls(),
    logger: createLogger({ level: 'silent' }),
    registry: createRegistry({ defaultMetrics: false }),
  });
}, 120_000);
afterAll(async () => {
  await stopOperatorProcesses();
  await central?.stop();
  await cluster?.stop();
  await rm(OUT, { recursive: true, force: true });
});

describe('the built operator (npm run build)', () => {
  it('refuses an output directory that holds the checkout (it would be emptied)', () => {
    // The check alone: a broken guard must not get the chance to empty the checkout here.
    for (const dir of [process.cwd(), dirname(process.cwd())])
      expect(() => checkOutDir(dir)).toThrow(OutDirError);
    expect(() => checkOutDir(OUT)).not.toThrow();
  });

  it('is a complete tree: every relative import and every file read resolves inside it', () => {
    const seen = new Set<string>();
    const visit = (file: string): void => {
      if (seen.has(file)) return;
      seen.add(file);
      expect(relative(OUT, file).startsWith('..'), `${file} is inside the build`).toBe(false);
      expect(existsSync(file), `${relative(OUT, file)} exists`).toBe(true);
      if (!file.endsWith('.js')) return;
      const source = readFileSync(file, 'utf8');
      expect(source, `${relative(OUT, file)} imports no .ts`).not.toMatch(/from\s+'\.[^']*\.ts'/);
      const specifiers = [
        ...source.matchAll(/^(?:import|export)\s[^;]*?from\s+'(\.[^']+)'/gms),
        ...source.matchAll(/^import\s+'(\.[^']+)'/gm),
        ...source.matchAll(/\bimport\(\s*'(\.[^']+)'\s*\)/g),
        ...source.matchAll(/new URL\(\s*'(\.[^']+)',\s*import\.meta\.url\s*\)/g),
      ].map((m) => m[1] ?? '');
      for (const spec of specifiers) visit(resolve(dirname(file), spec));
    };
    visit(main);
    expect(seen.size).toBeGreaterThan(20);
    // The operator reads no file of its own at run time (the CRD comes with the install).
    expect([...seen].filter((f) => !f.endsWith('.js'))).toEqual([]);
  });

  it('runs with the environment it is installed with: serves admission and holds a lease', async () => {
    const env = shippedEnv();
    expect(env.NODE_OPTIONS).toMatch(/--max-old-space-size=\d+/);
    const op = cluster.startOperator({
      name: 'built',
      main,
      env,
      central: { url: central.url, clusterId: 'cluster-east' },
    });
    await op.ready(60_000);
    await cluster.route([op]);
    await cluster.admissionWorks();
    await cluster.createLease('built', {
      leaseName: 'built',
      holderIdentity: 'unused',
      semantics: 'at-most-once',
      ttlSeconds: 30,
      heartbeatIntervalSeconds: 10,
    });
    await eventually(async () => (await cluster.lease('built'))?.status?.leaseState === 'held', {
      timeoutMs: 30_000,
    });
    expect(op.stderr()).toBe('');
  }, 120_000);
});
