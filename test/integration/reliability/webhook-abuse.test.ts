// Abusive clients against the admission server (webhooks/server.ts over real TLS): slow-loris clients
// (headers or body trickled), oversize bodies, and piles of idle connections (no TLS handshake, or a
// handshake and then nothing). Each is cut off by its deadline or refused with a clear answer, while
// ordinary reviews keep being answered. The server runs with its production timeouts shortened (the
// mechanism is the same; the defaults are asserted separately) so the test takes seconds, not minutes.
import { request as httpsRequest } from 'node:https';
import { connect as netConnect, type Socket } from 'node:net';
import { type TLSSocket, connect as tlsConnect } from 'node:tls';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allow } from '../../../webhooks/review.ts';
import {
  AdmissionServer,
  DEFAULT_SERVER_TIMEOUTS,
  MAX_BODY_BYTES,
  REQUEST_TIMEOUT_MS,
  type ServerTimeouts,
} from '../../../webhooks/server.ts';
import { SwappableCertificates, type TestPki, testPki } from '../../fixtures/webhooks/certs.ts';
import { eventually } from '../../helpers/eventually.ts';

const TIMEOUTS: ServerTimeouts = { handshakeMs: 800, headersMs: 800, requestMs: 1_500, checkIntervalMs: 100 };
/** Time for a deadline to be enforced: the deadline, a check interval, and slack for a busy machine. */
const CUT_WITHIN_MS = TIMEOUTS.requestMs + 10_000;
const HOST = 'webhook.test.svc';

let pki: TestPki;
let server: AdmissionServer;

beforeAll(async () => {
  pki = await testPki([HOST]);
  server = new AdmissionServer({
    port: 0,
    host: '127.0.0.1',
    certificates: new SwappableCertificates(pki.pair),
    handlers: [{ path: '/review', review: async () => allow() }],
    registry: new Registry(),
    timeouts: TIMEOUTS,
  });
  await server.start();
}, 30_000);
afterAll(async () => {
  await server?.close();
});

const reviewBody = (): string =>
  JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: crypto.randomUUID(),
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      name: 'p',
      namespace: 'default',
      operation: 'CREATE',
      userInfo: { username: 'someone' },
      object: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { containers: [] } },
    },
  });

interface Answer {
  status: number;
  body: string;
}

/** A POST as the API server makes it (own connection, the CA pinned); `body` may be chunked (no length). */
function post(body: string | Buffer, o: { chunked?: boolean } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        method: 'POST',
        host: '127.0.0.1',
        port: server.port,
        path: '/review?timeout=10s',
        servername: HOST,
        ca: pki.caCert,
        agent: false,
        headers: {
          'content-type': 'application/json',
          ...(o.chunked ? {} : { 'content-length': Buffer.byteLength(body) }),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => {
          text += d.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    // The server may answer 413 and close before reading all of an oversize body.
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') reject(err);
    });
    if (o.chunked) {
      const size = 256 * 1024;
      const buf = Buffer.isBuffer(body) ? body : Buffer.from(body);
      for (let at = 0; at < buf.length; at += size) req.write(buf.subarray(at, at + size));
      req.end();
    } else {
      req.end(body);
    }
  });
}

/** An ordinary review is answered: 200 and allowed. */
async function served(): Promise<void> {
  const answer = await post(reviewBody());
  expect(answer.status).toBe(200);
  expect(JSON.parse(answer.body)).toMatchObject({ response: { allowed: true } });
}

/** A TLS connection with its handshake done. */
function handshaken(): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port: server.port, servername: HOST, ca: pki.caCert });
    socket.once('secureConnect', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Tracks whether sockets were closed by the server, and what it sent before closing. */
interface Watched {
  closed: () => boolean;
  received: () => string;
}

function watchClose(socket: Socket): Watched {
  let closed = false;
  let received = '';
  socket.on('data', (d: Buffer) => {
    received += d.toString();
  });
  socket.on('error', () => {});
  socket.once('close', () => {
    closed = true;
  });
  return { closed: () => closed, received: () => received };
}

/** Writes `text` one byte per `everyMs` (cycling) until the socket closes; returns a stop function. */
function trickle(socket: Socket, text: string, everyMs: number): () => void {
  let at = 0;
  const timer = setInterval(() => {
    if (socket.destroyed) {
      clearInterval(timer);
      return;
    }
    socket.write(text[at++ % text.length] ?? 'a');
  }, everyMs);
  return () => clearInterval(timer);
}

const sockets: Socket[] = [];
afterAll(() => {
  for (const s of sockets) s.destroy();
});

describe('admission server under abusive clients', () => {
  it('has production deadlines for the handshake, the headers and the whole request', () => {
    // Each shorter than the API server's wait for a webhook at most (30 s) plus a margin, and checked
    // often enough to matter.
    expect(DEFAULT_SERVER_TIMEOUTS).toEqual({
      handshakeMs: 10_000,
      headersMs: 10_000,
      requestMs: REQUEST_TIMEOUT_MS,
      checkIntervalMs: 1_000,
    });
    expect(REQUEST_TIMEOUT_MS).toBeLessThanOrEqual(35_000);
  });

  /**
   * Five clients that each start a request and then trickle it (`start` writes what comes first and
   * returns the trickle's stop): all are cut off within the deadline (a 408 or nothing), while reviews
   * from others are served before and after.
   */
  async function trickledAreCutOff(start: (socket: TLSSocket) => () => void): Promise<void> {
    const stops: Array<() => void> = [];
    const watched: Watched[] = [];
    try {
      for (let i = 0; i < 5; i++) {
        const socket = await handshaken();
        sockets.push(socket);
        watched.push(watchClose(socket));
        stops.push(start(socket));
      }
      for (let i = 0; i < 5; i++) await served();
      await eventually(() => watched.every((w) => w.closed()), { timeoutMs: CUT_WITHIN_MS, intervalMs: 50 });
      // Node answers an expired header or request read with 408 before closing.
      for (const w of watched) expect(w.received()).toMatch(/^$|^HTTP\/1\.1 408/);
      await served();
    } finally {
      for (const stop of stops) stop();
    }
  }

  it('cuts off clients trickling their headers, and serves others meanwhile', async () => {
    await trickledAreCutOff((socket) => trickle(socket, 'POST /review HTTP/1.1\r\nHost: x\r\nX-Slow: ', 50));
  });

  it('cuts off clients trickling their body, and serves others meanwhile', async () => {
    await trickledAreCutOff((socket) => {
      socket.write(
        'POST /review HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n',
      );
      return trickle(socket, '{"apiVersion":"admission.k8s.io/v1",', 50);
    });
  });

  it('refuses a body over the limit with 413 (declared length or chunked) and keeps serving', async () => {
    const oversize = Buffer.alloc(MAX_BODY_BYTES + 1024, 'a');
    const declared = await post(oversize);
    expect(declared.status).toBe(413);
    expect(JSON.parse(declared.body)).toMatchObject({ code: 413 });
    await served();
    const chunked = await post(oversize, { chunked: true });
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.body)).toMatchObject({ code: 413 });
    await served();
    // Just under the limit is read in full: a well-formed denial of a malformed review, not a 413.
    const padded = JSON.stringify({ padding: 'a'.repeat(MAX_BODY_BYTES - 200) });
    const under = await post(padded);
    expect(under.status).toBe(400);
    await served();
  });

  it('is not exhausted by many idle connections, which are closed by their deadlines', async () => {
    const watched: Watched[] = [];
    // Connections that never start a TLS handshake...
    for (let i = 0; i < 100; i++) {
      const socket = netConnect({ host: '127.0.0.1', port: server.port });
      sockets.push(socket);
      watched.push(watchClose(socket));
    }
    // ...and connections that finish one and then send nothing.
    for (let i = 0; i < 100; i++) {
      const socket = await handshaken();
      sockets.push(socket);
      watched.push(watchClose(socket));
    }
    for (let i = 0; i < 10; i++) await served();
    await eventually(() => watched.every((w) => w.closed()), { timeoutMs: CUT_WITHIN_MS, intervalMs: 50 });
    await served();
  });
});
