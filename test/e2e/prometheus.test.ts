// A real Prometheus (hack/prometheus) on a real cluster (E2E_KUBECONFIG and E2E_WEBHOOK_HOST, or a control
// plane of this file's own), configured as the README tells users to: it scrapes the operator's secure
// /metrics (`--metrics-secure`, a certificate from `--metrics-cert-dir` that Prometheus verifies) with a
// ServiceAccount token bound to the ClusterRole `berth-operator-metrics-reader`, the central lease server's
// /metrics (`berth-operator central --metrics-addr`, a process of its own on a SQLite store, so that it can
// be stopped and started again on the same addresses without losing its leases) and kube-apiserver's, and
// evaluates the shipped rules (deploy/prometheus/*.rules.yaml) every second. Then:
// - a managed BerthLease is held; the central server stops: BerthLeaseHeartbeatUnhealthy fires within its
//   `for` plus one evaluation of the heartbeat turning unhealthy; the server starts again: it resolves;
// - every metric an alert or a dashboard panel (deploy/grafana/*.json) selects is in a real scrape, as
//   Prometheus' own parser reads the expressions, so a renamed metric fails here.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createAuthority } from '../../hack/controlplane/pki.ts';
import { metricsReaderRole } from '../../scripts/deploy-rbac.ts';
import { AdmissionMessage, MANAGED_LEASE } from '../../src/berth/api.ts';
import { findCondition } from '../../src/berth/status.ts';
import { centralTls } from '../helpers/central-tls.ts';
import { IN_SCOPE } from '../helpers/cluster.ts';
import { eventually } from '../helpers/eventually.ts';
import {
  expandGrafanaVariables,
  freeLoopbackPort,
  metricNamesOf,
  type PrometheusProcess,
  startPrometheus,
} from '../helpers/prometheus.ts';
import { E2eCluster, mergePatch, RUN_ID, RUN_LABEL } from './cluster.ts';
import { type E2eTarget, e2eTarget, skipReason } from './env.ts';
import { E2eOperator } from './operator.ts';
import { createLease, deployment, deploymentLease, leaseWhen, rejection } from './workloads.ts';

const skip = skipReason('the Prometheus scenario', ['kubeconfig', 'webhookHost']);

const PREFIX = `berth-e2e-prom-${RUN_ID}`;
const NS = `${PREFIX}-apps`;
const MONITORING = `${PREFIX}-monitoring`;
const CLUSTER_ID = 'e2e-prom';
const LEASE_NAME = 'web';
const ROOT = process.cwd();
const RULES_DIR = join(ROOT, 'deploy/prometheus');
const DASHBOARDS_DIR = join(ROOT, 'deploy/grafana');
const NODE = join(ROOT, 'node_modules/.bin/node');
const MAIN = join(ROOT, 'src/main.ts');
const READER_ROLE = metricsReaderRole().metadata?.name ?? '';

/** Prometheus' intervals: short, so that `for:` dominates the alert's timing. */
const SCRAPE_S = 1;
const EVAL_S = 1;
const HEARTBEAT_ALERT = 'BerthLeaseHeartbeatUnhealthy';

/** The job names of the scrape config (the rules select by metric, not by job). */
const JOB = { operator: 'berth-operator', central: 'berth-apiserver', apiserver: 'apiserver' } as const;

// ---- the rules and dashboards shipped in deploy/ ----

interface RuleFile {
  groups: Array<{
    name: string;
    rules: Array<{ alert?: string; record?: string; expr: string; for?: string }>;
  }>;
}

const ruleFiles = (): string[] =>
  existsSync(RULES_DIR)
    ? readdirSync(RULES_DIR)
        .filter((f) => /\.rules\.ya?ml$/.test(f))
        .sort()
        .map((f) => join(RULES_DIR, f))
    : [];

const rulesOf = (file: string) =>
  (parse(readFileSync(file, 'utf8')) as RuleFile).groups.flatMap((g) => g.rules);

/** Milliseconds of a Prometheus duration such as `1m`, `90s`, `1m30s`. */
function durationMs(text: string): number {
  const units: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  let total = 0;
  const rest = text.replace(/(\d+)(ms|s|m|h|d)/g, (_, n: string, u: string) => {
    total += Number(n) * (units[u] ?? Number.NaN);
    return '';
  });
  if (rest !== '' || !Number.isFinite(total)) throw new Error(`not a duration: ${text}`);
  return total;
}

interface Panel {
  title?: string;
  targets?: Array<{ expr?: string; datasource?: unknown }>;
  panels?: Panel[];
}
interface Dashboard {
  panels?: Panel[];
  rows?: Panel[];
  templating?: { list?: Array<{ name?: string; query?: string | { query?: string } }> };
}

const dashboardFiles = (): string[] =>
  existsSync(DASHBOARDS_DIR)
    ? readdirSync(DASHBOARDS_DIR)
        .filter((f) => f.endsWith('.json'))
        .sort()
        .map((f) => join(DASHBOARDS_DIR, f))
    : [];

/** Every PromQL query of a dashboard: panel targets (rows and nested panels too) and query variables. */
function dashboardQueries(file: string): Array<{ where: string; expr: string }> {
  const d = JSON.parse(readFileSync(file, 'utf8')) as Dashboard;
  const out: Array<{ where: string; expr: string }> = [];
  const walk = (panels: Panel[] | undefined): void => {
    for (const p of panels ?? []) {
      for (const t of p.targets ?? [])
        if (typeof t.expr === 'string' && t.expr.trim() !== '')
          out.push({ where: `panel "${p.title ?? '?'}"`, expr: expandGrafanaVariables(t.expr) });
      walk(p.panels);
    }
  };
  walk(d.panels);
  walk(d.rows);
  for (const v of d.templating?.list ?? []) {
    const q = typeof v.query === 'string' ? v.query : v.query?.query;
    if (typeof q !== 'string') continue;
    // Grafana's Prometheus variable functions: the selector or query inside is PromQL.
    const m =
      /^\s*(?:label_values\((.+),\s*[a-zA-Z_]\w*\s*\)|label_values\(([^,]+)\)|query_result\((.+)\))\s*$/s.exec(
        q,
      );
    const expr = m?.[1] ?? m?.[2] ?? m?.[3];
    if (expr !== undefined)
      out.push({ where: `variable "${v.name ?? '?'}"`, expr: expandGrafanaVariables(expr) });
  }
  return out;
}

/** A histogram's or summary's series carry suffixes; they count as the family's. */
const familyOf = (series: string): string => series.replace(/_(bucket|sum|count)$/, '');

// ---- the central server as its own process ----

class CentralProcess {
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #output = '';
  readonly url: string;
  readonly metricsHostPort: string;
  readonly #args: string[];

  private constructor(port: number, metricsPort: number, args: string[]) {
    this.url = `https://127.0.0.1:${port}`;
    this.metricsHostPort = `127.0.0.1:${metricsPort}`;
    this.#args = args;
  }

  static async create(dir: string): Promise<CentralProcess> {
    const tls = await centralTls();
    await writeFile(join(dir, 'central.crt'), tls.cert);
    await writeFile(join(dir, 'central.key'), tls.key, { mode: 0o600 });
    const port = await freeLoopbackPort();
    const metricsPort = await freeLoopbackPort();
    return new CentralProcess(port, metricsPort, [
      MAIN,
      'central',
      `--listen-addr=127.0.0.1:${port}`,
      `--tls-cert-file=${join(dir, 'central.crt')}`,
      `--tls-key-file=${join(dir, 'central.key')}`,
      `--metrics-addr=127.0.0.1:${metricsPort}`,
      '--store-backend=sql',
      '--sql-driver=sqlite',
      `--sql-dsn=${join(dir, 'leases.db')}`,
      '--auth-mode=none',
      '--log-level=warn',
    ]);
  }

  /** Starts the process and waits until its /readyz answers 200. */
  async start(): Promise<void> {
    const child = spawn(NODE, this.#args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
    });
    this.#child = child;
    let exited = false;
    this.#exited = new Promise((resolve) =>
      child.on('exit', () => {
        exited = true;
        resolve();
      }),
    );
    const take = (d: Buffer): void => {
      this.#output = (this.#output + d.toString()).slice(-20_000);
      if (process.env.BERTH_TEST_LOGS) process.stderr.write(d.toString().replace(/^(?=.)/gm, '[central] '));
    };
    child.stdout?.on('data', take);
    child.stderr?.on('data', take);
    await eventually(
      async () => {
        if (exited) throw new Error(`central exited: ${this.#output.slice(-2_000)}`);
        const res = await fetch(`http://${this.metricsHostPort}/readyz`, {
          signal: AbortSignal.timeout(2_000),
        });
        await res.text();
        return res.status === 200;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
  }

  get running(): boolean {
    return this.#child !== undefined;
  }

  /** SIGTERM, and waits for the exit. */
  async stop(): Promise<void> {
    this.#child?.kill('SIGTERM');
    const timer = setTimeout(() => this.#child?.kill('SIGKILL'), 10_000);
    await this.#exited;
    clearTimeout(timer);
    this.#child = undefined;
  }
}

// ---- Prometheus' API ----

interface Target {
  labels: Record<string, string>;
  scrapePool: string;
  health: 'up' | 'down' | 'unknown';
  lastError: string;
}
interface Alert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
}

describe.skipIf(skip)('a real Prometheus scrapes the operator and the central server', () => {
  let target: E2eTarget | undefined;
  let cluster: E2eCluster;
  let dir: string;
  let central: CentralProcess | undefined;
  let operator: E2eOperator;
  let prom: PrometheusProcess | undefined;

  const alerts = async (name: string): Promise<Alert[]> =>
    (await prom!.api<{ alerts: Alert[] }>('/api/v1/alerts')).alerts.filter(
      (a) => a.labels.alertname === name,
    );
  const query = async (
    expr: string,
  ): Promise<Array<{ metric: Record<string, string>; value: [number, string] }>> =>
    (
      await prom!.api<{ result: Array<{ metric: Record<string, string>; value: [number, string] }> }>(
        '/api/v1/query',
        { query: expr },
      )
    ).result;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-e2e-prom-'));
    target = await e2eTarget(1);
    cluster = new E2eCluster('cluster', target.kubeconfigs[0]!);
    cluster.onCleanup('scratch directory', () => rm(dir, { recursive: true, force: true }));
    await cluster.installCrd();
    await cluster.createNamespace(NS, IN_SCOPE);

    central = await CentralProcess.create(dir);
    await central.start();

    // The operator's /metrics certificate, from a CA Prometheus is given (as with --metrics-cert-dir and a
    // cert-manager Certificate), so the scrape verifies the server instead of skipping verification.
    const metricsCa = await createAuthority(`${PREFIX}-metrics-ca`);
    const metricsPair = await metricsCa.serving(['localhost', '127.0.0.1']);
    const metricsCertDir = join(dir, 'metrics-certs');
    await mkdir(metricsCertDir);
    await writeFile(join(metricsCertDir, 'tls.crt'), metricsPair.cert);
    await writeFile(join(metricsCertDir, 'tls.key'), metricsPair.key, { mode: 0o600 });
    await writeFile(join(dir, 'metrics-ca.crt'), metricsCa.cert);

    operator = await E2eOperator.install(cluster, {
      prefix: PREFIX,
      appNamespaces: [NS],
      webhookHost: target.webhookHost,
      secureMetrics: true,
      leaderElection: true,
      nodeTaintGuard: true,
    });
    cluster.onCleanup('operator', () => operator.stop());
    cluster.onCleanup('BerthLeases', () => cluster.removeBerthLeases(NS));
    await operator.start(CLUSTER_ID, central.url, [
      '--metrics-bind-address=127.0.0.1:0',
      '--metrics-secure',
      `--metrics-cert-dir=${metricsCertDir}`,
      // As the installs run it: a leader (leader_election_master_status) and the node taint guard
      // (berth_nodetaint_*), which finds no agent Pods here and taints nothing.
      '--leader-elect',
      '--node-taint-guard=true',
    ]);

    // The scraper, exactly as the README says: a ServiceAccount, bound to berth-operator-metrics-reader
    // (the install's ClusterRole; created here when the cluster has no install), and its token.
    await cluster.createNamespace(MONITORING);
    const readerExists = await cluster.rbac.readClusterRole({ name: READER_ROLE }).then(
      () => true,
      () => false,
    );
    if (!readerExists) {
      await cluster.rbac.createClusterRole({ body: metricsReaderRole() });
      cluster.onCleanup(`clusterrole ${READER_ROLE}`, () =>
        cluster.rbac.deleteClusterRole({ name: READER_ROLE }),
      );
    }
    const binding = `${PREFIX}-prometheus`;
    for (const sa of ['prometheus', 'unbound'])
      await cluster.core.createNamespacedServiceAccount({
        namespace: MONITORING,
        body: { metadata: { name: sa } },
      });
    await cluster.rbac.createClusterRoleBinding({
      body: {
        metadata: { name: binding, labels: { [RUN_LABEL]: RUN_ID } },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: READER_ROLE },
        subjects: [{ kind: 'ServiceAccount', namespace: MONITORING, name: 'prometheus' }],
      },
    });
    cluster.onCleanup(`clusterrolebinding ${binding}`, () =>
      cluster.rbac.deleteClusterRoleBinding({ name: binding }),
    );
    const tokenOf = async (name: string): Promise<string> =>
      (
        await cluster.core.createNamespacedServiceAccountToken({
          namespace: MONITORING,
          name,
          body: { spec: { audiences: [], expirationSeconds: 3600 } },
        })
      ).status?.token ?? '';
    await writeFile(join(dir, 'prometheus.token'), await tokenOf('prometheus'), { mode: 0o600 });
    await writeFile(join(dir, 'unbound.token'), await tokenOf('unbound'), { mode: 0o600 });

    // kube-apiserver, as the kubeconfig reaches it, with the same token (the reader role's get on /metrics
    // is what kube-apiserver's own /metrics needs too).
    const apiserver = cluster.kc.getCurrentCluster();
    if (apiserver === null) throw new Error(`${cluster.kubeconfigPath}: no current cluster`);
    const apiserverUrl = new URL(apiserver.server);
    const apiserverCa = join(dir, 'apiserver-ca.crt');
    if (apiserver.caData) await writeFile(apiserverCa, Buffer.from(apiserver.caData, 'base64'));
    else if (apiserver.caFile) await writeFile(apiserverCa, readFileSync(apiserver.caFile));

    const metricsAddress = operator.metricsAddress;
    if (metricsAddress === undefined) throw new Error('the operator serves no /metrics');
    const files = ruleFiles();
    const tokenJob = (job: string, targets: string[], tls: Record<string, unknown>, token: string) => ({
      job_name: job,
      scheme: 'https',
      authorization: { credentials_file: join(dir, token) },
      tls_config: tls,
      static_configs: [{ targets }],
    });
    prom = await startPrometheus({
      config: {
        global: {
          scrape_interval: `${SCRAPE_S}s`,
          scrape_timeout: `${SCRAPE_S}s`,
          evaluation_interval: `${EVAL_S}s`,
        },
        rule_files: files,
        scrape_configs: [
          tokenJob(
            JOB.operator,
            [metricsAddress],
            { ca_file: join(dir, 'metrics-ca.crt'), server_name: 'localhost' },
            'prometheus.token',
          ),
          // The same endpoint with a token the reader role is not bound to: refused (403).
          tokenJob(
            'unbound',
            [metricsAddress],
            { ca_file: join(dir, 'metrics-ca.crt'), server_name: 'localhost' },
            'unbound.token',
          ),
          {
            job_name: JOB.central,
            static_configs: [{ targets: [central.metricsHostPort] }],
          },
          tokenJob(JOB.apiserver, [apiserverUrl.host], { ca_file: apiserverCa }, 'prometheus.token'),
        ],
      },
    });

    // A managed Deployment: its Pods go through the webhooks (admission and gate metrics exist), and one
    // denied change is counted, by the operator and by kube-apiserver.
    await createLease(cluster, NS, LEASE_NAME, deploymentLease(LEASE_NAME, 1));
    await cluster.apps.createNamespacedDeployment({ namespace: NS, body: deployment(LEASE_NAME) });
    await leaseWhen(cluster, NS, LEASE_NAME, (l) => l.status?.leaseState === 'held');
    const denied = await rejection(
      cluster.apps.patchNamespacedDeployment(
        { namespace: NS, name: LEASE_NAME, body: { metadata: { annotations: { [MANAGED_LEASE]: null } } } },
        mergePatch,
      ),
    );
    expect(denied).toContain(AdmissionMessage.bindingChanged);
  });

  afterAll(async () => {
    await prom?.stop();
    // A test that failed during the outage: the operator releases its leases through the server.
    if (central !== undefined && !central.running) await central.start().catch(() => undefined);
    const failed = (await cluster?.cleanup()) ?? [];
    await central?.stop();
    if (failed.length > 0) console.warn(`e2e cleanup left something behind:\n${failed.join('\n')}`);
    await target?.stop();
  });

  it('scrapes the operator with a token bound to berth-operator-metrics-reader, the central server and kube-apiserver', async () => {
    const targets = await eventually(
      async () => {
        const active = (await prom!.api<{ activeTargets: Target[] }>('/api/v1/targets?state=active'))
          .activeTargets;
        const pending = active.filter((t) => t.health === 'unknown');
        if (pending.length > 0 || active.length < 4)
          throw new Error(`not scraped yet: ${JSON.stringify(active)}`);
        return active;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const byJob = Object.fromEntries(targets.map((t) => [t.scrapePool, t]));
    for (const job of Object.values(JOB))
      expect({ job, health: byJob[job]?.health, lastError: byJob[job]?.lastError }).toEqual({
        job,
        health: 'up',
        lastError: '',
      });
    // The reader role is what lets a token in: the operator's SubjectAccessReview refuses the other one.
    expect(byJob.unbound?.health).toBe('down');
    expect(byJob.unbound?.lastError).toContain('403');
    // A target's health is set before its scrape's samples are committed (kube-apiserver's large scrape
    // showed up in a CI run as healthy with no `up` yet), so wait for every job's sample.
    const up = await eventually(
      async () => {
        const samples = await query('up');
        if (samples.length < targets.length)
          throw new Error(`up not committed yet: ${JSON.stringify(samples)}`);
        return samples;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(Object.fromEntries(up.map((s) => [s.metric.job, s.value[1]]))).toEqual({
      [JOB.operator]: '1',
      [JOB.central]: '1',
      [JOB.apiserver]: '1',
      unbound: '0',
    });
  });

  it(`fires ${HEARTBEAT_ALERT} when the central server stops, within its for plus one evaluation, and resolves it when it is back`, async () => {
    const rule = ruleFiles()
      .flatMap(rulesOf)
      .find((r) => r.alert === HEARTBEAT_ALERT);
    expect(rule, `${HEARTBEAT_ALERT} in ${RULES_DIR}`).toBeDefined();
    const forMs = durationMs(rule?.for ?? '0s');
    const series = `berth_lease_heartbeat_healthy{namespace="${NS}",name="${LEASE_NAME}"}`;
    await eventually(async () => (await query(series))[0]?.value[1] === '1', {
      timeoutMs: 30_000,
      intervalMs: 250,
    });
    expect(await alerts(HEARTBEAT_ALERT)).toEqual([]);

    await central!.stop();
    const unhealthy = await leaseWhen(
      cluster,
      NS,
      LEASE_NAME,
      (l) => findCondition(l.status, 'HeartbeatHealthy')?.status === 'False',
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const turned = Date.now();
    expect(findCondition(unhealthy.status, 'HeartbeatHealthy')?.reason).toBeTruthy();

    // Pending from the first evaluation that sees the 0 (one scrape and one evaluation later), firing at
    // the first evaluation `for` after that. Polled: no fixed sleep, a deadline with a little slack for
    // the polling and a loaded machine.
    const bound = forMs + (SCRAPE_S + 2 * EVAL_S) * 1000;
    const firing = await eventually(
      async () => {
        const list = await alerts(HEARTBEAT_ALERT);
        const mine = list.find((a) => a.labels.namespace === NS && a.labels.name === LEASE_NAME);
        if (mine?.state !== 'firing') throw new Error(`not firing yet: ${JSON.stringify(list)}`);
        return mine;
      },
      { timeoutMs: bound + 10_000, intervalMs: 250 },
    );
    const firedAfter = Date.now() - turned;
    expect(firedAfter).toBeLessThanOrEqual(bound + 2_000);
    expect(firing.labels).toMatchObject({ namespace: NS, name: LEASE_NAME });
    // As Prometheus recorded it: active from the first evaluation after the scrape that saw the 0, and
    // firing from the evaluation `for` later, not sooner and not more than one evaluation later (its
    // ALERTS series holds a sample per evaluation, stamped with the evaluation's time).
    const activeAt = Date.parse(firing.activeAt);
    expect(activeAt - turned).toBeLessThanOrEqual((SCRAPE_S + EVAL_S) * 1000 + 1_000);
    const samples = await prom!.api<{ result: Array<{ values: Array<[number, string]> }> }>('/api/v1/query', {
      query: `ALERTS{alertname="${HEARTBEAT_ALERT}",alertstate="firing",namespace="${NS}",name="${LEASE_NAME}"}[5m]`,
    });
    const firstFiring = (samples.result[0]?.values[0]?.[0] ?? Number.NaN) * 1000;
    expect(firstFiring - activeAt).toBeGreaterThanOrEqual(forMs);
    expect(firstFiring - activeAt).toBeLessThanOrEqual(forMs + EVAL_S * 1000 + 100);

    await central!.start();
    await leaseWhen(
      cluster,
      NS,
      LEASE_NAME,
      (l) =>
        findCondition(l.status, 'HeartbeatHealthy')?.status === 'True' && l.status?.leaseState === 'held',
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    await eventually(
      async () => {
        const list = await alerts(HEARTBEAT_ALERT);
        if (list.length > 0) throw new Error(`still active: ${JSON.stringify(list)}`);
        return true;
      },
      { timeoutMs: 15_000, intervalMs: 250 },
    );
    expect((await query(series))[0]?.value[1]).toBe('1');
  });

  it('finds every metric an alert or a dashboard panel uses in a real scrape', async () => {
    const uses = new Map<string, string[]>();
    const use = (name: string, where: string): void => {
      uses.set(name, [...(uses.get(name) ?? []), where]);
    };
    const files = ruleFiles();
    expect(files.length, `rule files in ${RULES_DIR}`).toBeGreaterThan(0);
    for (const file of files)
      for (const r of rulesOf(file))
        for (const name of await metricNamesOf(prom!, r.expr))
          use(name, `${file.slice(ROOT.length + 1)}: ${r.alert ?? r.record}`);
    // Recording rules' outputs are series Prometheus makes, not scraped ones.
    const recorded = new Set(files.flatMap(rulesOf).flatMap((r) => (r.record ? [r.record] : [])));
    const dashboards = dashboardFiles();
    expect(dashboards.length, `dashboards in ${DASHBOARDS_DIR}`).toBeGreaterThan(0);
    for (const file of dashboards)
      for (const q of dashboardQueries(file))
        for (const name of await metricNamesOf(prom!, q.expr))
          use(name, `${file.slice(ROOT.length + 1)}: ${q.where}`);

    // Every series name of a scraped target over the whole run, less what the rules make (alerts' and
    // recording rules' series may keep a job label).
    const made = new Set(['ALERTS', 'ALERTS_FOR_STATE', ...recorded]);
    const scrapedOrMade = new Set(
      await prom!.api<string[]>(
        `/api/v1/label/__name__/values?${new URLSearchParams({ 'match[]': '{job!=""}', start: '0', end: String(Date.now() / 1000) })}`,
      ),
    );
    const scraped = new Set([...scrapedOrMade].filter((n) => !made.has(n)));
    const families = new Set([...scraped].map(familyOf));
    const missing: string[] = [];
    for (const [name, where] of uses) {
      if (made.has(name) || scraped.has(name) || families.has(name)) continue;
      // Say whether a target declares it (HELP/TYPE) without a series, or nothing knows the name at all.
      const declared = await prom!.api<Record<string, unknown[]>>(
        `/api/v1/metadata?${new URLSearchParams({ metric: name })}`,
      );
      const why =
        Object.keys(declared).length > 0
          ? 'declared by a target but no series was scraped: export it from 0 or exercise it here'
          : 'no target exports it';
      missing.push(`${name}: ${why} (used by ${[...new Set(where)].join('; ')})`);
    }
    expect(missing).toEqual([]);
    expect(uses.size).toBeGreaterThan(0);
  });
});
