import { describe, expect, it } from 'vitest';
import {
  childLogger,
  createLogger,
  formatTextLine,
  isSecretField,
  type LogLevel,
  REDACTED,
  redactSecrets,
  scrubJsonLine,
  scrubSecrets,
} from '../../../src/observability/logger.ts';

const JWT =
  'eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YmVydGgifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ';
const PEM = [
  '-----BEGIN RSA PRIVATE KEY-----',
  'MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun',
  '-----END RSA PRIVATE KEY-----',
].join('\n');

function capture(level: LogLevel = 'info') {
  const lines: Array<Record<string, unknown>> = [];
  const raw: string[] = [];
  const logger = createLogger({
    level,
    name: 'test',
    destination: {
      write(line: string) {
        raw.push(line);
        lines.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  });
  return { logger, lines, raw };
}

describe('createLogger', () => {
  it('writes JSON lines with level names, a timestamp and the logger name', () => {
    const { logger, lines } = capture();
    logger.info({ answer: 42 }, 'hello');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 'info', logger: 'test', msg: 'hello', answer: 42 });
    expect(typeof lines[0]?.time).toBe('string');
  });

  it('honours the configured level', () => {
    const quiet = capture('warn');
    quiet.logger.info('dropped');
    quiet.logger.warn('kept');
    expect(quiet.lines.map((l) => l.msg)).toEqual(['kept']);
    const verbose = capture('debug');
    verbose.logger.debug('shown');
    expect(verbose.lines.map((l) => l.msg)).toEqual(['shown']);
  });

  it('child loggers carry controller, namespace, name and reconcileID', () => {
    const { logger, lines } = capture();
    const log = childLogger(logger, {
      controller: 'berthlease',
      namespace: 'ns1',
      name: 'db',
      reconcileID: 'r-1',
    });
    log.info('reconciling');
    childLogger(logger, { controller: 'nodetaint', namespace: '' }).info('x');
    expect(lines[0]).toMatchObject({
      controller: 'berthlease',
      namespace: 'ns1',
      name: 'db',
      reconcileID: 'r-1',
      msg: 'reconciling',
    });
    expect(lines[1]).toMatchObject({ controller: 'nodetaint' });
    expect(lines[1]).not.toHaveProperty('namespace');
  });
});

describe('secret redaction in log output', () => {
  it('redacts credential fields at any depth but keeps ordinary ones', () => {
    const { logger, lines, raw } = capture();
    const input = {
      req: { headers: { authorization: 'Bearer abc.def', 'content-type': 'application/json' } },
      token: 's3cr3t-token',
      fencingToken: 17,
      tls: { 'tls.crt': 'CERT', 'tls.key': 'KEYDATA' },
      creds: { privateKey: 'PK', password: 'hunter2', apiKey: 'AK' },
      user: { client_key_data: 'CKD' },
    };
    logger.info(input, 'request');
    const line = lines[0] as Record<string, Record<string, Record<string, unknown>>>;
    expect(line.req?.headers?.authorization).toBe(REDACTED);
    expect(line.req?.headers?.['content-type']).toBe('application/json');
    expect(line.token).toBe(REDACTED);
    expect(line.fencingToken).toBe(17);
    expect(line.tls).toEqual({ 'tls.crt': 'CERT', 'tls.key': REDACTED });
    expect(line.creds).toEqual({ privateKey: REDACTED, password: REDACTED, apiKey: REDACTED });
    expect(line.user).toEqual({ client_key_data: REDACTED });
    for (const secret of ['abc.def', 's3cr3t-token', 'KEYDATA', 'PK', 'hunter2', 'AK', 'CKD']) {
      expect(raw[0]).not.toContain(`"${secret}"`);
    }
    // The caller's object is untouched.
    expect(input.token).toBe('s3cr3t-token');
    expect(input.req.headers.authorization).toBe('Bearer abc.def');
  });

  it('masks bearer tokens, JWTs and private keys inside messages and string fields', () => {
    const { logger, raw } = capture();
    logger.info('calling with Authorization: Bearer abcdef0123456789');
    logger.info('token is %s', JWT);
    logger.warn({ body: `key follows\n${PEM}\ndone` }, 'bad secret');
    logger.info({ detail: `basic: Basic dXNlcjpwYXNz` }, 'x');
    const all = raw.join('');
    expect(all).not.toContain('abcdef0123456789');
    expect(all).not.toContain(JWT.slice(0, 30));
    expect(all).not.toContain('MIIEowIBAAKCAQEA');
    expect(all).not.toContain('dXNlcjpwYXNz');
    expect(all).toContain('Bearer [REDACTED]');
    expect(all).toContain('[REDACTED PRIVATE KEY]');
  });

  it('scrubs errors, their message and stack, including the message pino takes from them', () => {
    const { logger, lines, raw } = capture();
    const err = new Error('HTTP 401, request header Authorization: Bearer leaked-token-value');
    logger.error(err);
    logger.error({ err }, 'lease renew failed');
    expect(raw.join('')).not.toContain('leaked-token-value');
    expect(lines[0]?.msg).toContain('Bearer [REDACTED]');
    const logged = lines[1]?.err as Record<string, unknown> | undefined;
    expect(logged?.message).toContain('Bearer [REDACTED]');
    expect(logged?.type).toBe('Error');
  });

  it('scrubs child bindings, by field name and by value', () => {
    const { logger, raw } = capture();
    logger.child({ token: 'child-secret' }).info('x');
    logger.child({ controller: 'c' }).child({ note: 'Bearer nested-child-secret' }).info('y');
    expect(raw[0]).not.toContain('child-secret');
    expect(raw[1]).not.toContain('nested-child-secret');
    expect(raw[1]).toContain('"controller":"c"');
  });

  it('keeps the line valid JSON when a key has no END line', () => {
    const { logger, lines } = capture();
    // A field name that is not secret, holding a truncated key with escapes after it.
    logger.info({ excerpt: '-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE"quoted"\\', after: 'kept' }, 'm');
    expect(lines[0]?.excerpt).toBe('[REDACTED PRIVATE KEY]');
    expect(lines[0]?.after).toBe('kept');
  });
});

describe('redaction helpers', () => {
  it('isSecretField matches credential names only', () => {
    for (const name of [
      'authorization',
      'Authorization',
      'token',
      'bearer_token',
      'tls.key',
      'privateKey',
      'key',
    ]) {
      expect(isSecretField(name), name).toBe(true);
    }
    for (const name of ['fencingToken', 'continueToken', 'keys', 'monkey', 'name', 'tls.crt']) {
      expect(isSecretField(name), name).toBe(false);
    }
  });

  it('redactSecrets returns the input itself when nothing is secret, and bounds depth', () => {
    const clean = { a: 1, b: ['x', { c: 'y' }], d: new Date(0) };
    expect(redactSecrets(clean)).toBe(clean);
    let deep: Record<string, unknown> = { leaf: 'v' };
    for (let i = 0; i < 20; i++) deep = { next: deep };
    expect(JSON.stringify(redactSecrets(deep))).toContain('[Truncated]');
  });

  it('scrubSecrets masks an unterminated private key to the end', () => {
    expect(scrubSecrets('x -----BEGIN PRIVATE KEY-----\nMIIB')).toBe('x [REDACTED PRIVATE KEY]');
    expect(scrubJsonLine('{"a":"-----BEGIN PRIVATE KEY-----\\nMI\\"B","b":1}')).toBe(
      '{"a":"[REDACTED PRIVATE KEY]","b":1}',
    );
    expect(scrubSecrets('nothing here')).toBe('nothing here');
  });
});

describe('text format', () => {
  it('formats a JSON line like Go slog text: time, level, msg, then fields, nested keys dotted', () => {
    const line = JSON.stringify({
      level: 'warn',
      time: '2026-09-07T09:00:00.000Z',
      logger: 'central',
      msg: 'OIDC JWKS refresh failed',
      n: 3,
      ok: true,
      none: null,
      empty: '',
      url: 'https://issuer.example.com/keys?x=1',
      err: { type: 'Error', message: 'a "quoted"\nproblem' },
      tags: ['a', 'b'],
    });
    expect(formatTextLine(`${line}\n`)).toBe(
      'time=2026-09-07T09:00:00.000Z level=WARN msg="OIDC JWKS refresh failed" logger=central n=3 ok=true ' +
        'none=null empty="" url="https://issuer.example.com/keys?x=1" err.type=Error ' +
        'err.message="a \\"quoted\\"\\nproblem" tags="[\\"a\\",\\"b\\"]"\n',
    );
  });

  it('passes a line that is not a JSON object unchanged', () => {
    expect(formatTextLine('plain text\n')).toBe('plain text\n');
    expect(formatTextLine('[1,2]\n')).toBe('[1,2]\n');
  });

  it('writes one text line per record through createLogger, still redacted', () => {
    const out: string[] = [];
    const logger = createLogger({
      name: 'central',
      format: 'text',
      destination: { write: (l: string) => out.push(l) },
    });
    logger.info({ authorization: `Bearer ${JWT}`, url: 'https://x' }, 'request\nwith %s', 'token');
    logger.error({ err: new Error(`failed with ${JWT}`) }, 'boom');
    expect(out).toHaveLength(2);
    expect(out[0]).toMatch(
      /^time=\S+ level=INFO msg="request\\nwith token" logger=central authorization=\[REDACTED\] url=https:\/\/x\n$/,
    );
    expect(out[1]).toMatch(
      / level=ERROR msg=boom .*err\.message="failed with \[REDACTED\]" err\.stack="Error: failed/,
    );
    expect(out.join('')).not.toContain(JWT);
    expect(out.every((l) => l.indexOf('\n') === l.length - 1)).toBe(true);
  });
});
