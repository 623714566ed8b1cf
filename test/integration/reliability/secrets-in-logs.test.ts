// Security: no secret ever reaches the logs or /metrics. The embedded system (sandbox, central server,
// operator with its webhooks) runs a BerthLease at debug level; then its operator is replaced by one that
// authenticates to a static-keys central server with --berth-api-key, both logging to memory, and a client
// with a wrong key is refused. The captured lines and every /metrics page are scanned for the sandbox's
// bearer tokens, the API keys and any PEM private key.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CentralServer, startCentralServer } from '../../../src/central/server.ts';
import { parseFlags } from '../../../src/cli.ts';
import { parseRunConfig } from '../../../src/config.ts';
import {
  type EmbeddedSystem,
  OPERATOR_NAMESPACE,
  OPERATOR_SERVICE_ACCOUNT,
  startEmbeddedSystem,
} from '../../../src/embedded.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { buildOperator, parseFeatureConfigs, runCommand } from '../../../src/run.ts';
import { eventually } from '../../helpers/eventually.ts';
import { kubeConfigFrom } from '../../helpers/sandbox.ts';

const CLUSTER = 'cluster-a';
const API_KEY = `berth-key-${randomBytes(24).toString('hex')}`;
const WRONG_KEY = `wrong-key-${randomBytes(24).toString('hex')}`;

let dir: string;
let system: EmbeddedSystem;
let central: CentralServer | undefined;
let stopOperator: (() => Promise<void>) | undefined;
const lines: string[] = [];
const memory = { write: (line: string) => void lines.push(line) };

const tokenOf = (kubeconfig: string): string => {
  const token = /token:\s*"?([^"\s]+)"?/.exec(kubeconfig)?.[1];
  if (token === undefined || token.length < 8) throw new Error('no token in kubeconfig');
  return token;
};

const berthLease = (name: string) => ({
  apiVersion: 'berth.skaphos.io/v1alpha1',
  kind: 'BerthLease',
  metadata: { name },
  spec: {
    leaseName: name,
    holderIdentity: name,
    ttlSeconds: 15,
    heartbeatIntervalSeconds: 5,
    semantics: 'at-most-once',
  },
});

async function heldBy(custom: CustomObjectsApi, name: string): Promise<string | undefined> {
  const got = (await custom.getNamespacedCustomObject({
    group: 'berth.skaphos.io',
    version: 'v1alpha1',
    namespace: 'default',
    plural: 'berthleases',
    name,
  })) as { status?: { leaseState?: string; currentHolder?: string } };
  return got.status?.leaseState === 'held' ? got.status.currentHolder : undefined;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-secrets-'));
  system = await startEmbeddedSystem({
    listen: '127.0.0.1:0',
    kubeconfigPath: join(dir, 'kubeconfig'),
    simulateWorkloads: true,
    clusterId: 'sandbox',
    logPath: join(dir, 'operator.log'),
    logLevel: 'trace',
  });
  await system.ready;
}, 60_000);

afterAll(async () => {
  await stopOperator?.();
  await central?.stop();
  await system?.stop();
  await rm(dir, { recursive: true, force: true });
}, 60_000);

describe('secrets stay out of logs and metrics', () => {
  it('the embedded operator and central server never log a bearer token or private key', async () => {
    const custom = kubeConfigFrom(system.sandbox.kubeconfig).makeApiClient(CustomObjectsApi);
    await custom.createNamespacedCustomObject({
      group: 'berth.skaphos.io',
      version: 'v1alpha1',
      namespace: 'default',
      plural: 'berthleases',
      body: berthLease('embedded'),
    });
    expect(await eventually(() => heldBy(custom, 'embedded'))).toBe('sandbox');

    // Swap the embedded operator for one that authenticates with an API key.
    system.manager.stop('replaced by the API-key operator');
    expect(await system.done).toBe(0);
    const log = await readFile(join(dir, 'operator.log'), 'utf8');
    expect(log).toContain('admission server listening'); // the scan below looks at real output
    const secrets = [
      tokenOf(system.sandbox.kubeconfig),
      tokenOf(system.sandbox.users.serviceAccount(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT).kubeconfig),
    ];
    for (const secret of secrets) expect(log).not.toContain(secret);

    expect(log).not.toContain('PRIVATE KEY-----');
  });

  it('an operator with --berth-api-key and a static-keys central server keep the key out of logs and /metrics', async () => {
    const keysFile = join(dir, 'api-keys');
    await writeFile(keysFile, `${CLUSTER}:${createHash('sha256').update(API_KEY).digest('hex')}\n`);
    const logger = createLogger({ level: 'trace', destination: memory });
    central = await startCentralServer({
      logger: logger.child({ component: 'central' }),
      authMode: 'static-keys',
      apiKeysFile: keysFile,
      metricsAddr: '127.0.0.1:0',
    });
    const flags = parseFlags(runCommand, [
      `--namespace=${OPERATOR_NAMESPACE}`,
      `--berth-api-server=${central.url}`,
      `--berth-api-key=${API_KEY}`,
      `--cluster-id=${CLUSTER}`,
      '--enable-workload-admission',
      `--workload-operator-user=system:serviceaccount:${OPERATOR_NAMESPACE}:${OPERATOR_SERVICE_ACCOUNT}`,
      `--workload-operator-namespace=${OPERATOR_NAMESPACE}`,
      '--webhook-service-name=berth-operator-webhook',
      '--webhook-port=0',
      '--health-probe-bind-address=127.0.0.1:0',
      '--metrics-bind-address=127.0.0.1:0',
      '--drain-window=0s',
      `--agent-namespace=${OPERATOR_NAMESPACE}`,
    ]);
    const sandbox = system.sandbox;
    const { manager } = buildOperator(parseRunConfig(flags), {
      kubeConfig: kubeConfigFrom(
        sandbox.users.serviceAccount(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT).kubeconfig,
      ),
      namespace: OPERATOR_NAMESPACE,
      logger: logger.child({ component: 'operator' }),
      features: parseFeatureConfigs(flags, OPERATOR_NAMESPACE),
      onWebhookListening: (port) =>
        sandbox.services.map(OPERATOR_NAMESPACE, 'berth-operator-webhook', { host: '127.0.0.1', port }),
    });
    const done = manager.run();
    stopOperator = async () => {
      manager.stop('test done');
      await done;
    };

    const custom = kubeConfigFrom(sandbox.kubeconfig).makeApiClient(CustomObjectsApi);
    await custom.createNamespacedCustomObject({
      group: 'berth.skaphos.io',
      version: 'v1alpha1',
      namespace: 'default',
      plural: 'berthleases',
      body: berthLease('keyed'),
    });
    expect(await eventually(() => heldBy(custom, 'keyed'), { timeoutMs: 30_000 })).toBe(CLUSTER);

    // A client with a wrong key is refused, and that attempt is logged without the key.
    const refused = await fetch(`${central.url}/v1alpha1/namespaces/default/leases/keyed/acquire`, {
      method: 'POST',
      headers: { authorization: `Bearer ${WRONG_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ holder: CLUSTER, ttlSeconds: 15 }),
    });
    expect(refused.status).toBe(401);
    await eventually(() => lines.some((l) => l.includes('401')) || undefined);

    const metrics = await (await fetch(`${central.metricsUrl}/metrics`)).text();
    expect(metrics).toContain('berth_');
    const captured = lines.join('');
    expect(captured).toContain('"component":"operator"');
    expect(captured).toContain('"component":"central"');
    const secrets = [
      API_KEY,
      WRONG_KEY,
      tokenOf(sandbox.kubeconfig),
      tokenOf(sandbox.users.serviceAccount(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT).kubeconfig),
    ];
    for (const text of [captured, metrics]) {
      for (const secret of secrets) expect(text).not.toContain(secret);
      expect(text).not.toContain('PRIVATE KEY-----');
    }
  }, 60_000);
});
