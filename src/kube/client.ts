// Kubernetes client plumbing on top of @kubernetes/client-node 2.x: KubeConfig loading, error helpers that
// read the Status out of ApiException's raw-text body (and our KubeApiError's), JSON Patch pieces and API
// paths. The request transport every component shares is transport.ts.
//
// Never log an ApiException as-is: its message embeds the full response body and headers. Use
// `describeError(err)`, which keeps only code, reason and message.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { V1Status } from '@kubernetes/client-node';
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import type { RawResponse } from './transport.ts';

// ---- KubeConfig loading ----

export type KubeConfigSource = 'flag' | 'env' | 'in-cluster' | 'home';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface KubeConfigInputs {
  /** `--kubeconfig` flag value. */
  flag?: string | undefined;
  /** `KUBECONFIG` (may hold several paths separated by the platform delimiter). */
  env?: string | undefined;
  /** KUBERNETES_SERVICE_HOST and the service-account token are present. */
  inCluster: boolean;
  /** `~/.kube/config` path if that file exists. */
  homeConfig?: string | undefined;
}

export type KubeConfigChoice =
  | { source: 'flag' | 'env' | 'home'; paths: string[] }
  | { source: 'in-cluster' };

/**
 * Where to load the configuration from, in controller-runtime's order (`config.GetConfig`):
 * `--kubeconfig`, then `KUBECONFIG`, then in-cluster, then `~/.kube/config`. In-cluster comes before the
 * home file so a stray file baked into an image cannot redirect a pod. Undefined when nothing is
 * available (client-node would silently fall back to http://localhost:8080; we refuse).
 */
export function chooseKubeConfig(inputs: KubeConfigInputs): KubeConfigChoice | undefined {
  const flag = inputs.flag?.trim();
  if (flag) return { source: 'flag', paths: [flag] };
  const envPaths = (inputs.env ?? '').split(delimiter).filter((p) => p.trim() !== '');
  if (envPaths.length > 0) return { source: 'env', paths: envPaths };
  if (inputs.inCluster) return { source: 'in-cluster' };
  if (inputs.homeConfig) return { source: 'home', paths: [inputs.homeConfig] };
  return undefined;
}

export interface LoadKubeConfigOptions {
  /** `--kubeconfig`. */
  kubeconfig?: string | undefined;
  /** `--context`: a context other than the current one. */
  context?: string | undefined;
  env?: NodeJS.ProcessEnv;
  home?: string;
  /** Directory holding token, ca.crt and namespace (tests point it elsewhere). */
  serviceAccountDir?: string;
}

export interface LoadedKubeConfig {
  kc: KubeConfig;
  source: KubeConfigSource;
  /** Files read (empty for in-cluster). */
  paths: string[];
  /** Namespace of the current context, if it names one. */
  namespace: string | undefined;
}

export function loadKubeConfig(options: LoadKubeConfigOptions = {}): LoadedKubeConfig {
  const env = options.env ?? process.env;
  const saDir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const homeFile = join(options.home ?? homedir(), '.kube', 'config');
  const choice = chooseKubeConfig({
    flag: options.kubeconfig,
    env: env.KUBECONFIG,
    inCluster:
      Boolean(env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT) && existsSync(join(saDir, 'token')),
    homeConfig: existsSync(homeFile) ? homeFile : undefined,
  });
  if (choice === undefined) {
    throw new Error(
      'no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, create ~/.kube/config or run in a pod',
    );
  }
  const kc = new KubeConfig();
  let paths: string[] = [];
  if (choice.source === 'in-cluster') {
    loadInCluster(kc, env, saDir);
  } else {
    paths = choice.paths;
    const [first, ...rest] = paths;
    if (first === undefined) throw new Error('no kubeconfig path');
    loadFile(kc, first);
    for (const path of rest) {
      const other = new KubeConfig();
      loadFile(other, path);
      // Like kubectl: the first file that sets a value wins, including the current context.
      kc.mergeConfig(other, true);
    }
  }
  if (options.context) {
    if (kc.getContextObject(options.context) === null) {
      throw new Error(`context "${options.context}" not found in the kubeconfig`);
    }
    kc.setCurrentContext(options.context);
  }
  if (kc.getCurrentCluster() === null) {
    throw new Error(`kubeconfig (${choice.source}) has no current context with a cluster`);
  }
  return {
    kc,
    source: choice.source,
    paths,
    namespace: kc.getContextObject(kc.getCurrentContext())?.namespace,
  };
}

function loadFile(kc: KubeConfig, path: string): void {
  try {
    kc.loadFromFile(path);
  } catch (err) {
    // The message of a YAML error can quote file content (tokens): report only the path and kind.
    const kind = err instanceof Error ? err.name : 'error';
    const code = (err as { code?: unknown }).code;
    throw new Error(`cannot load kubeconfig ${path}: ${typeof code === 'string' ? code : kind}`);
  }
}

function loadInCluster(kc: KubeConfig, env: NodeJS.ProcessEnv, saDir: string): void {
  const host = env.KUBERNETES_SERVICE_HOST ?? '';
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  const server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  kc.loadFromClusterAndUser(
    { name: 'inCluster', server, caFile: join(saDir, 'ca.crt'), skipTLSVerify: false },
    // tokenFile is re-read by client-node on every request, so projected-token rotation is honoured.
    {
      name: 'inClusterUser',
      authProvider: { name: 'tokenFile', config: { tokenFile: join(saDir, 'token') } },
    },
  );
}

/**
 * A non-2xx answer of the API server, shaped like client-node's ApiException (`code`, `body`, `headers`)
 * so the helpers below treat both alike; the message holds only code, reason and message.
 */
export class KubeApiError extends Error {
  readonly code: number;
  readonly body: V1Status;
  readonly headers: Record<string, string>;

  constructor(code: number, status: V1Status, headers: Record<string, string> = {}) {
    super(`${code} ${status.reason ?? 'Unknown'}: ${status.message ?? ''}`.trim());
    this.name = 'KubeApiError';
    this.code = code;
    this.body = status;
    this.headers = headers;
  }
}

/** Parses a response body into a Status when it is one; otherwise builds one from the code. */
export function statusFromBody(code: number, text: string): V1Status {
  const parsed = parseStatus(text);
  if (parsed !== undefined) return { ...parsed, code: parsed.code ?? code };
  const message = text.trim().slice(0, 300);
  return { kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason: reasonForCode(code), message };
}

/** Reads the response as JSON, throwing KubeApiError for any non-2xx status. */
export async function readJson<T>(res: RawResponse): Promise<T> {
  const text = await res.text();
  if (res.status < 200 || res.status > 299)
    throw new KubeApiError(res.status, statusFromBody(res.status, text), res.headers);
  return JSON.parse(text) as T;
}

// ---- error helpers ----

function parseStatus(text: string): V1Status | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return isStatusLike(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function isStatusLike(value: unknown): value is V1Status {
  if (value === null || typeof value !== 'object') return false;
  const v = value as Record<string, unknown>;
  return v.kind === 'Status' || typeof v.reason === 'string' || typeof v.code === 'number';
}

const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  406: 'NotAcceptable',
  409: 'Conflict',
  410: 'Expired',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

function reasonForCode(code: number): string {
  return REASONS[code] ?? 'Unknown';
}

function errorCode(err: unknown): number | undefined {
  if (err === null || typeof err !== 'object') return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'number' && code >= 100 && code <= 599 ? code : undefined;
}

/**
 * The Kubernetes Status carried by an error: client-node's ApiException (whose `body` is the raw
 * response text in 2.x), our KubeApiError, or a Status object itself (e.g. a watch ERROR event).
 * Undefined for errors that did not come from the API server (network failures, aborts).
 */
export function statusOf(err: unknown): V1Status | undefined {
  if (err === null || typeof err !== 'object') return undefined;
  const code = errorCode(err);
  if (code === undefined) return undefined;
  const body = (err as { body?: unknown }).body;
  if (typeof body === 'string') return statusFromBody(code, body);
  if (isStatusLike(body)) return { ...body, code: body.code ?? code };
  if ((err as { kind?: unknown }).kind === 'Status') return err as V1Status;
  return { kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason: reasonForCode(code) };
}

/** HTTP status of an API error, undefined for other errors. */
export function statusCodeOf(err: unknown): number | undefined {
  return statusOf(err)?.code;
}

function reasonOf(err: unknown): string | undefined {
  return statusOf(err)?.reason;
}

export function isNotFound(err: unknown): boolean {
  return reasonOf(err) === 'NotFound' || (statusCodeOf(err) === 404 && reasonOf(err) !== 'Expired');
}

/** A 409 that is not AlreadyExists: a resourceVersion/UID precondition failed, re-read and retry. */
export function isConflict(err: unknown): boolean {
  const reason = reasonOf(err);
  return reason === 'Conflict' || (statusCodeOf(err) === 409 && reason !== 'AlreadyExists');
}

export function isAlreadyExists(err: unknown): boolean {
  return reasonOf(err) === 'AlreadyExists';
}

/** 410: the requested resourceVersion was compacted (reason Expired or Gone): relist. */
export function isGone(err: unknown): boolean {
  const reason = reasonOf(err);
  return statusCodeOf(err) === 410 || reason === 'Expired' || reason === 'Gone';
}

export function isTooManyRequests(err: unknown): boolean {
  return statusCodeOf(err) === 429 || reasonOf(err) === 'TooManyRequests';
}

export function isForbidden(err: unknown): boolean {
  return statusCodeOf(err) === 403;
}

export function isInvalid(err: unknown): boolean {
  return statusCodeOf(err) === 422 || reasonOf(err) === 'Invalid';
}

/** Seconds the server asked us to wait (Status details or Retry-After header), if any. */
export function retryAfterSeconds(err: unknown): number | undefined {
  const fromStatus = statusOf(err)?.details?.retryAfterSeconds;
  if (typeof fromStatus === 'number' && fromStatus > 0) return fromStatus;
  const headers = (err as { headers?: unknown } | null)?.headers;
  if (headers !== null && typeof headers === 'object') {
    for (const [k, v] of Object.entries(headers)) {
      if (k.toLowerCase() !== 'retry-after') continue;
      const n = Number(v);
      if (Number.isFinite(n) && n > 0) return n;
    }
  }
  return undefined;
}

/** A one-line, secret-free description for logs and readiness reasons. */
export function describeError(err: unknown): string {
  const status = statusOf(err);
  if (status !== undefined) {
    const message = (status.message ?? '').split('\n', 1)[0] ?? '';
    return `${status.code ?? ''} ${status.reason ?? 'Unknown'}${message ? `: ${message.slice(0, 300)}` : ''}`.trim();
  }
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    const detail = cause instanceof Error && cause.message !== err.message ? ` (${cause.message})` : '';
    return `${err.name}: ${err.message}${detail}`.slice(0, 400);
  }
  return String(err).slice(0, 400);
}

// ---- patches ----

export interface JsonPatchOp {
  op: 'add' | 'remove' | 'replace' | 'test' | 'move' | 'copy';
  path: string;
  value?: unknown;
  from?: string;
}

/** Escapes one JSON Pointer segment (RFC 6901), e.g. a label key containing '/'. */
export function jsonPointerSegment(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

// ---- paths ----

export interface ResourceRef {
  /** API group, '' or absent for the core group. */
  group?: string;
  version: string;
  /** Lower-case plural resource name, e.g. `pods`. */
  plural: string;
  /** Restricts to one namespace; absent for all namespaces or cluster-scoped resources. */
  namespace?: string;
}

/**
 * `/api/v1/namespaces/ns/pods`, `/apis/apps/v1/deployments`, ...: the collection, or with `name` the one
 * object in it (`/api/v1/nodes/node-1`).
 */
export function resourcePath(ref: ResourceRef, name?: string): string {
  const base = ref.group ? `/apis/${ref.group}/${ref.version}` : `/api/${ref.version}`;
  const ns = ref.namespace ? `/namespaces/${encodeURIComponent(ref.namespace)}` : '';
  const collection = `${base}${ns}/${ref.plural}`;
  return name === undefined ? collection : `${collection}/${encodeURIComponent(name)}`;
}
