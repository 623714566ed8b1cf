// The one piece of I/O in the admission chain: POSTing an AdmissionReview over TLS the way
// kube-apiserver's webhook client does (k8s.io/apiserver/pkg/util/webhook/client.go), and describing
// failures in Go's words so error messages read like a real cluster's.
import https from 'node:https';
import { posix } from 'node:path';
import type { Webhook } from './admission-match.ts';
import { decodeBase64Strict } from './admission-review.ts';

export type ServiceResolver = (
  namespace: string,
  name: string,
  port: number,
) => { host: string; port: number } | undefined;

export interface WebhookEndpoint {
  /** The URL as kube reports it, `?timeout=` included. */
  url: string;
  /** Where to connect; a string is the dial error of a service that cannot be reached. */
  dial: { host: string; port: number } | string;
  /** Path and query of the request. */
  path: string;
  hostHeader: string;
  /** TLS server name to verify; for services `<name>.<namespace>.svc`, for URLs the URL's host. */
  servername: string | undefined;
  /** PEM CA bundle; undefined trusts the system roots. */
  ca: string | undefined;
}

/** time.Duration.String() for whole seconds, as the `timeout` query parameter carries it. */
export function goDurationSeconds(seconds: number): string {
  if (seconds < 60) return `${seconds}s`;
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  return `${h > 0 ? `${h}h` : ''}${m}m${seconds % 60}s`;
}

/** The rest client's path.Join: cleaned, no trailing slash, "/" when empty. */
const cleanPath = (p: string): string => {
  const joined = posix.normalize(`/${p}`);
  return joined.length > 1 && joined.endsWith('/') ? joined.slice(0, -1) : joined;
};

/**
 * client-go's rootCertPool: a caBundle replaces the system roots (it is not added to them); one that holds
 * no certificate is an error before any call is made.
 */
function caFrom(caBundle: string | undefined): string | undefined {
  if (!caBundle) return undefined;
  let pem: string;
  try {
    pem = decodeBase64Strict(caBundle).toString('utf8');
  } catch {
    pem = '';
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    throw new Error('unable to load root certificates: unable to parse bytes as PEM block');
  }
  return pem;
}

/**
 * ClientManager.HookClient: where a webhook is called. Throws (kube's "could not get REST client") for a
 * configuration that names no target. `resolveService` plays the service resolver: undefined means no
 * endpoint, which kube only discovers when dialing.
 */
export function webhookEndpoint(
  clientConfig: Webhook['clientConfig'],
  timeoutSeconds: number,
  resolveService: ServiceResolver,
): WebhookEndpoint {
  const query = `?timeout=${goDurationSeconds(timeoutSeconds)}`;
  const ca = caFrom(clientConfig.caBundle);
  const service = clientConfig.service;
  if (service) {
    const port = service.port ?? 443;
    const serverName = `${service.name}.${service.namespace}.svc`;
    const hostPort = `${serverName}:${port}`;
    const path = cleanPath(service.path ?? '') + query;
    const resolved = resolveService(service.namespace, service.name, port);
    return {
      url: `https://${hostPort}${path}`,
      dial: resolved ?? `no endpoints available for service ${JSON.stringify(service.name)}`,
      path,
      hostHeader: hostPort,
      servername: serverName,
      ca,
    };
  }
  if (!clientConfig.url) throw new Error('webhook configuration must have either service or URL');
  // Keep the authority as written (Node's URL drops a default port; Go's error text keeps it).
  const raw = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)/.exec(clientConfig.url);
  let parsed: URL;
  try {
    parsed = new URL(clientConfig.url);
  } catch (err) {
    throw new Error(`Unparsable URL: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!raw || parsed.protocol !== 'https:') throw new Error(`'https' is the only allowed URL scheme`);
  const path = cleanPath(raw[3] ?? '') + query;
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  return {
    url: `${raw[1]}://${raw[2]}${path}`,
    dial: { host, port: parsed.port ? Number(parsed.port) : 443 },
    path,
    hostHeader: raw[2] ?? parsed.host,
    servername: undefined,
    ca,
  };
}

export type PostOutcome =
  | { kind: 'response'; statusCode: number; contentType: string; body: string }
  | { kind: 'error'; cause: string };

const hostPort = (host: string, port: number | string): string =>
  host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;

interface NodeError extends Error {
  code?: string;
  address?: string;
  port?: number;
  hostname?: string;
  host?: string;
  cert?: { subjectaltname?: string };
}

const UNKNOWN_AUTHORITY = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_SIGNATURE_FAILURE',
]);

/** Node's transport and TLS errors in the words of Go's net/http and crypto/tls, where one maps cleanly. */
export function goTransportCause(err: NodeError, dial: { host: string; port: number }): string {
  const verify = 'tls: failed to verify certificate: x509: ';
  const code = err.code ?? '';
  if (code === 'ECONNREFUSED')
    return `dial tcp ${hostPort(err.address ?? dial.host, err.port ?? dial.port)}: connect: connection refused`;
  if (code === 'ENOTFOUND') return `dial tcp: lookup ${err.hostname ?? dial.host}: no such host`;
  if (code === 'EHOSTUNREACH') return `dial tcp ${hostPort(dial.host, dial.port)}: connect: no route to host`;
  if (code === 'ETIMEDOUT') return `dial tcp ${hostPort(dial.host, dial.port)}: i/o timeout`;
  if (code === 'ECONNRESET')
    return err.message === 'socket hang up' ? 'EOF' : 'read: connection reset by peer';
  if (UNKNOWN_AUTHORITY.has(code)) return `${verify}certificate signed by unknown authority`;
  if (code === 'CERT_HAS_EXPIRED' || code === 'CERT_NOT_YET_VALID')
    return `${verify}certificate has expired or is not yet valid`;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    const names = (err.cert?.subjectaltname ?? '')
      .split(', ')
      .map((n) => n.replace(/^(DNS|IP Address):/, ''))
      .filter((n) => n !== '');
    return names.length === 0
      ? `${verify}certificate relies on legacy Common Name field, use SANs instead`
      : `${verify}certificate is valid for ${names.join(', ')}, not ${err.host ?? dial.host}`;
  }
  return err.message;
}

/**
 * POSTs the review and never rejects. The deadline covers connecting, TLS and reading the whole answer
 * (Go's context deadline); when it passes the request and its socket are destroyed.
 */
export function postReview(endpoint: WebhookEndpoint, body: string, timeoutMs: number): Promise<PostOutcome> {
  const dial = endpoint.dial;
  if (typeof dial === 'string') return Promise.resolve({ kind: 'error', cause: dial });
  return new Promise((resolve) => {
    let settled = false;
    const finish = (outcome: PostOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const req = https.request(
      {
        method: 'POST',
        host: dial.host,
        port: dial.port,
        path: endpoint.path,
        servername: endpoint.servername,
        ca: endpoint.ca,
        // A connection per call: nothing pooled outlives the request (kube pools; the sandbox need not).
        agent: false,
        headers: {
          host: endpoint.hostHeader,
          'content-type': 'application/json',
          accept: 'application/json, */*',
          'user-agent': 'kube-apiserver-admission',
          'content-length': String(Buffer.byteLength(body)),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', (err: NodeError) => finish({ kind: 'error', cause: goTransportCause(err, dial) }));
        res.on('end', () =>
          finish({
            kind: 'response',
            statusCode: res.statusCode ?? 0,
            contentType: res.headers['content-type'] ?? '',
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      },
    );
    const timer = setTimeout(() => {
      finish({ kind: 'error', cause: 'context deadline exceeded' });
      req.destroy();
    }, timeoutMs);
    req.on('error', (err: NodeError) => finish({ kind: 'error', cause: goTransportCause(err, dial) }));
    req.end(body);
  });
}
