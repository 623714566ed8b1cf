// Security: no secret ever reaches the logs or /metrics. The whole system (a control plane of the file's
// own with the CRD, the operator's RBAC, Service and webhook configurations; the central server; the
// operator in this process with its webhooks and controllers, as its service account, selfsigned
// certificates) runs a BerthLease at trace level; then its operator is replaced by one that authenticates
// to a static-keys central server with --berth-api-key, and a client with a wrong key is refused. All of
// them log to memory. The captured lines and every /metrics page are scanned for the cluster's bearer
// tokens (the admin's and the operator's), the API keys and any PEM private key.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseRbac, selfSignedRbac } from '../../../scripts/deploy-rbac.ts';
import { type CentralServer, startCentralServer } from '../../../src/central/server.ts';
import { parseFlags } from '../../../src/cli.ts';
import { parseRunConfig } from '../../../src/config.ts';
import { parseFeatureConfigs } from '../../../src/features.ts';
import type { Manager } from '../../../src/kube/manager.ts';
import { nodeTaintRbacObjects } from '../../../src/nodetaint/rbac.ts';
import { createLogger, type Logger } from '../../../src/observability/logger.ts';
import { buildOperator, runCommand } from '../../../src/run.ts';
import {
  mutatingWebhookConfiguration,
  validatingWebhookConfiguration,
} from '../../../webhooks/configurations.ts';
import { centralTls } from '../../helpers/central-tls.ts';
import { type ServiceAccountUser, TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { createObjects } from './operator-cluster.ts';

const OPERATOR_NAMESPACE = 'berth-system';
const OPERATOR_SERVICE_ACCOUNT = 'berth-operator';
const OPERATOR_USER = `system:serviceaccount:${OPERATOR_NAMESPACE}:${OPERATOR_SERVICE_ACCOUNT}`;
const WEBHOOK_SERVICE = 'berth-operator-webhook';
const CLUSTER = 'cluster-a';
const API_KEY = `berth-key-${randomBytes(24).toString('hex')}`;
const WRONG_KEY = `wrong-key-${randomBytes(24).toString('hex')}`;

let t: TestCluster;
let operatorAccount: ServiceAccountUser;
let dir: string;
let central: CentralServer | undefined;
let keyedCentral: CentralServer | undefined;
let stopOperator: (() => Promise<void>) | undefined;
const routes: Promise<unknown>[] = [];
/** The first operator's and its central server's lines. */
const localLines: string[] = [];
/** The API-key operator's and the static-keys central server's lines. */
const lines: string[] = [];

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

/** The operator as `npm start` runs it (its own flags after), as its service account. */
function startOperator(logger: Logger, extraFlags: string[]): { manager: Manager; done: Promise<number> } {
  const flags = parseFlags(runCommand, [
    `--namespace=${OPERATOR_NAMESPACE}`,
    '--enable-workload-admission',
    `--workload-operator-user=${OPERATOR_USER}`,
    `--workload-operator-namespace=${OPERATOR_NAMESPACE}`,
    `--webhook-service-name=${WEBHOOK_SERVICE}`,
    '--webhook-port=0',
    '--health-probe-bind-address=127.0.0.1:0',
    '--metrics-bind-address=127.0.0.1:0',
    '--drain-window=0s',
    `--agent-namespace=${OPERATOR_NAMESPACE}`,
    ...extraFlags,
  ]);
  const { manager } = buildOperator(parseRunConfig(flags), {
    kubeConfig: operatorAccount.kc,
    namespace: OPERATOR_NAMESPACE,
    logger,
    features: parseFeatureConfigs(flags, OPERATOR_NAMESPACE),
    onWebhookListening: (port) => {
      routes.push(t.routeService(OPERATOR_NAMESPACE, WEBHOOK_SERVICE, [{ port }]));
    },
  });
  return { manager, done: manager.run().then((r) => r.exitCode) };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-secrets-'));
  t = await TestCluster.own();
  await t.installBerthLeaseCrd();
  await t.createNamespace(OPERATOR_NAMESPACE);
  await createObjects(t.kc, [
    ...baseRbac(),
    ...selfSignedRbac(),
    ...nodeTaintRbacObjects({
      name: 'berth-operator-node-taint-guard',
      agentNamespace: OPERATOR_NAMESPACE,
      subject: { kind: 'ServiceAccount', name: OPERATOR_SERVICE_ACCOUNT, namespace: OPERATOR_NAMESPACE },
    }),
  ]);
  await t.core.createNamespacedService({
    namespace: OPERATOR_NAMESPACE,
    body: {
      metadata: { name: WEBHOOK_SERVICE },
      spec: { ports: [{ name: 'webhook', port: 443, targetPort: 9443 }] },
    },
  });
  // Without a caBundle: the operator fills it in (selfsigned certificates).
  const admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
  const params = { namespace: OPERATOR_NAMESPACE, serviceName: WEBHOOK_SERVICE, scope: 'opt-in' } as const;
  await admission.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(params) });
  await admission.createValidatingWebhookConfiguration({ body: validatingWebhookConfiguration(params) });
  operatorAccount = await t.serviceAccount(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT);
});

afterAll(async () => {
  await stopOperator?.();
  await central?.stop();
  await keyedCentral?.stop();
  await t?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('secrets stay out of logs and metrics', () => {
  it('the operator and central server never log a bearer token or private key', async () => {
    const logger = createLogger({
      level: 'trace',
      name: 'berth-operator',
      destination: { write: (line: string) => void localLines.push(line) },
    });
    central = await startCentralServer({
      tls: await centralTls(),
      logger: logger.child({ component: 'central' }),
    });
    const local = startOperator(logger, [`--berth-api-server=${central.url}`, '--cluster-id=cluster-local']);
    stopOperator = async () => {
      local.manager.stop('test done');
      await local.done;
    };
    const custom = t.kc.makeApiClient(CustomObjectsApi);
    await custom.createNamespacedCustomObject({
      group: 'berth.skaphos.io',
      version: 'v1alpha1',
      namespace: 'default',
      plural: 'berthleases',
      body: berthLease('local'),
    });
    expect(await eventually(() => heldBy(custom, 'local'), { timeoutMs: 30_000 })).toBe('cluster-local');

    // Swap this operator for one that authenticates with an API key.
    local.manager.stop('replaced by the API-key operator');
    expect(await local.done).toBe(0);
    stopOperator = undefined;
    await Promise.all(routes.splice(0));
    const log = localLines.join('');
    expect(log).toContain('admission server listening'); // the scan below looks at real output
    for (const secret of [t.adminToken, operatorAccount.token]) expect(log).not.toContain(secret);
    expect(log).not.toContain('PRIVATE KEY-----');
  }, 60_000);

  it('an operator with --berth-api-key and a static-keys central server keep the key out of logs and /metrics', async () => {
    const keysFile = join(dir, 'api-keys');
    await writeFile(keysFile, `${CLUSTER}:${createHash('sha256').update(API_KEY).digest('hex')}\n`);
    const logger = createLogger({
      level: 'trace',
      destination: { write: (line: string) => void lines.push(line) },
    });
    keyedCentral = await startCentralServer({
      tls: await centralTls(),
      logger: logger.child({ component: 'central' }),
      authMode: 'static-keys',
      apiKeysFile: keysFile,
      metricsAddr: '127.0.0.1:0',
    });
    const keyed = startOperator(logger.child({ component: 'operator' }), [
      `--berth-api-server=${keyedCentral.url}`,
      `--berth-api-key=${API_KEY}`,
      `--cluster-id=${CLUSTER}`,
    ]);
    stopOperator = async () => {
      keyed.manager.stop('test done');
      await keyed.done;
    };

    const custom = t.kc.makeApiClient(CustomObjectsApi);
    await custom.createNamespacedCustomObject({
      group: 'berth.skaphos.io',
      version: 'v1alpha1',
      namespace: 'default',
      plural: 'berthleases',
      body: berthLease('keyed'),
    });
    expect(await eventually(() => heldBy(custom, 'keyed'), { timeoutMs: 30_000 })).toBe(CLUSTER);

    // A client with a wrong key is refused, and that attempt is logged without the key.
    const refused = await fetch(`${keyedCentral.url}/v1alpha1/namespaces/default/leases/keyed/acquire`, {
      method: 'POST',
      headers: { authorization: `Bearer ${WRONG_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ holder: CLUSTER, ttlSeconds: 15 }),
    });
    expect(refused.status).toBe(401);
    await eventually(() => lines.some((l) => l.includes('401')) || undefined);

    await Promise.all(routes.splice(0));
    const metrics = await (await fetch(`${keyedCentral.metricsUrl}/metrics`)).text();
    expect(metrics).toContain('berth_');
    const captured = lines.join('');
    expect(captured).toContain('"component":"operator"');
    expect(captured).toContain('"component":"central"');
    const secrets = [API_KEY, WRONG_KEY, t.adminToken, operatorAccount.token];
    for (const text of [captured, metrics]) {
      for (const secret of secrets) expect(text).not.toContain(secret);
      expect(text).not.toContain('PRIVATE KEY-----');
    }
  }, 60_000);
});
