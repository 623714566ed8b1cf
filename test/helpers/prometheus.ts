// A real Prometheus (hack/prometheus, built from github.com/prometheus/prometheus) as a child process, for
// the tests that scrape the operator and the central server and evaluate the shipped rules: a config of
// the test's own, a TSDB in a temporary directory, the HTTP API on a free loopback port.
//
//   const prom = await startPrometheus({ config: { global: {...}, scrape_configs: [...] } });
//   await prom.api('/api/v1/targets');   // the `data` of the answer, or throws with Prometheus' error
//   await prom.stop();
//
// And what a test needs to check rules and dashboards against real scrapes: the metric names a PromQL
// expression selects, from Prometheus' own parser (`/api/v1/parse_query`), never from a regex.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { ensurePrometheus } from '../../hack/prometheus/build.ts';
import { eventually } from './eventually.ts';

/** A free loopback port (for a process that must be restarted on the same address). */
export async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface PrometheusOptions {
  /** The configuration file's content (prometheus.yml), as an object. */
  config: Record<string, unknown>;
  /** Further flags. */
  args?: string[];
}

export interface PrometheusProcess {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  dir: string;
  child: ChildProcess;
  /** GET (or POST with a form) of an API path; the answer's `data`. */
  api<T = unknown>(path: string, form?: Record<string, string>): Promise<T>;
  /** Output so far (Prometheus logs to stderr). */
  log(): string;
  stop(): Promise<void>;
}

interface ApiAnswer<T> {
  status: 'success' | 'error';
  data?: T;
  errorType?: string;
  error?: string;
}

export async function startPrometheus(o: PrometheusOptions): Promise<PrometheusProcess> {
  const { prometheus } = await ensurePrometheus();
  const dir = await mkdtemp(join(tmpdir(), 'berth-prometheus-'));
  const configFile = join(dir, 'prometheus.yml');
  await writeFile(configFile, stringify(o.config));
  const port = await freeLoopbackPort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    prometheus,
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=info',
      ...(o.args ?? []),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH, HOME: process.env.HOME } },
  );
  let output = '';
  const take = (d: Buffer): void => {
    output += d.toString();
    if (output.length > 2_000_000) output = output.slice(-1_000_000);
    if (process.env.BERTH_TEST_LOGS) process.stderr.write(d.toString().replace(/^(?=.)/gm, '[prometheus] '));
  };
  child.stdout?.on('data', take);
  child.stderr?.on('data', take);
  let exited = false;
  const done = new Promise<void>((resolve) =>
    child.on('exit', () => {
      exited = true;
      resolve();
    }),
  );

  const api = async <T>(path: string, form?: Record<string, string>): Promise<T> => {
    const res = await fetch(`${url}${path}`, {
      signal: AbortSignal.timeout(10_000),
      ...(form === undefined
        ? {}
        : {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams(form).toString(),
          }),
    });
    const body = (await res.json()) as ApiAnswer<T>;
    if (body.status !== 'success')
      throw new Error(`prometheus ${path}: ${res.status} ${body.errorType ?? ''}: ${body.error ?? ''}`);
    return body.data as T;
  };

  const stop = async (): Promise<void> => {
    if (!exited) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await done;
    clearTimeout(timer);
    await rm(dir, { recursive: true, force: true });
  };

  try {
    await eventually(
      async () => {
        if (exited) throw new Error(`prometheus exited:\n${output.slice(-3_000)}`);
        try {
          const res = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(2_000) });
          await res.text();
          return res.status === 200;
        } catch {
          return false;
        }
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, dir, child, api, log: () => output, stop };
}

/**
 * The metric names `expr` selects, from the AST Prometheus' own parser gives (`/api/v1/parse_query`):
 * every vector and range selector's name, or its `__name__="..."` matcher. A selector naming no metric
 * (`{job="x"}`, `{__name__=~"..."}`) is returned as an error: the check could not hold it to a scrape.
 */
export async function metricNamesOf(prom: PrometheusProcess, expr: string): Promise<string[]> {
  const ast = await prom.api('/api/v1/parse_query', { query: expr });
  const names = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const n of node) visit(n);
      return;
    }
    if (node === null || typeof node !== 'object') return;
    const n = node as Record<string, unknown>;
    if (n.type === 'vectorSelector' || n.type === 'matrixSelector') {
      const matchers = Array.isArray(n.matchers) ? (n.matchers as Array<Record<string, unknown>>) : [];
      const byName = matchers.find((m) => m.name === '__name__' && m.type === '=');
      const name = typeof n.name === 'string' && n.name !== '' ? n.name : byName?.value;
      if (typeof name !== 'string' || name === '')
        throw new Error(`a selector in ${JSON.stringify(expr)} names no metric: ${JSON.stringify(n)}`);
      names.add(name);
      return;
    }
    for (const value of Object.values(n)) visit(value);
  };
  visit(ast);
  return [...names].sort();
}

/** Grafana's built-in variables in a panel query, replaced by values Prometheus can parse. */
export function expandGrafanaVariables(expr: string): string {
  return expr
    .replace(/\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)(:[^}]*)?\}/g, '5m')
    .replace(/\$__(interval_ms|range_ms|range_s)\b/g, '300');
}
