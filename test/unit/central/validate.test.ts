import { describe, expect, it } from 'vitest';
import { decodeBody, validateKey, validateRequest } from '../../../src/central/validate.ts';

describe('decodeBody (Go json.Decoder with DisallowUnknownFields)', () => {
  it('decodes the three request bodies', () => {
    expect(decodeBody('{"holder":"east","ttlSeconds":30}', 'acquire')).toEqual({
      ok: true,
      value: { holder: 'east', ttlSeconds: 30 },
    });
    expect(decodeBody(' {"holder":"east","fencingToken":7,"ttlSeconds":30}\n', 'renew')).toEqual({
      ok: true,
      value: { holder: 'east', fencingToken: 7, ttlSeconds: 30 },
    });
    expect(decodeBody('{"holder":"east","fencingToken":7}', 'release')).toEqual({
      ok: true,
      value: { holder: 'east', fencingToken: 7 },
    });
  });

  it('matches field names case-insensitively and lets null leave a field unset', () => {
    expect(decodeBody('{"HOLDER":"east","TtlSeconds":30,"holder":null}', 'acquire')).toEqual({
      ok: true,
      value: { holder: 'east', ttlSeconds: 30 },
    });
    expect(decodeBody('null', 'acquire')).toEqual({ ok: true, value: {} });
  });

  const failures: Array<[string, string, 'acquire' | 'renew' | 'release', string]> = [
    ['empty body', '', 'acquire', 'invalid json body: EOF'],
    ['whitespace only', ' \n\t', 'acquire', 'invalid json body: EOF'],
    ['truncated', '{"holder":"east"', 'acquire', 'invalid json body: unexpected EOF'],
    [
      'unknown field',
      '{"holder":"east","ttlSeconds":30,"extra":1}',
      'acquire',
      'invalid json body: json: unknown field "extra"',
    ],
    [
      'token on acquire',
      '{"holder":"east","fencingToken":1}',
      'acquire',
      'invalid json body: json: unknown field "fencingToken"',
    ],
    [
      'ttl on release',
      '{"holder":"east","ttlSeconds":1}',
      'release',
      'invalid json body: json: unknown field "ttlSeconds"',
    ],
    [
      'string ttl',
      '{"holder":"east","ttlSeconds":"30"}',
      'acquire',
      'invalid json body: json: cannot unmarshal string into Go struct field acquireRequest.ttlSeconds of type int32',
    ],
    [
      'fractional token',
      '{"holder":"east","fencingToken":1.5,"ttlSeconds":1}',
      'renew',
      'invalid json body: json: cannot unmarshal number 1.5 into Go struct field renewRequest.fencingToken of type int32',
    ],
    [
      'token above int32',
      '{"holder":"east","fencingToken":2147483648}',
      'release',
      'invalid json body: json: cannot unmarshal number 2147483648 into Go struct field releaseRequest.fencingToken of type int32',
    ],
    [
      'numeric holder',
      '{"holder":5}',
      'acquire',
      'invalid json body: json: cannot unmarshal number 5 into Go struct field acquireRequest.holder of type string',
    ],
    [
      'array body',
      '[1]',
      'acquire',
      'invalid json body: json: cannot unmarshal array into Go value of type api.acquireRequest',
    ],
    [
      'string body',
      '"x"',
      'renew',
      'invalid json body: json: cannot unmarshal string into Go value of type api.renewRequest',
    ],
    [
      'two objects',
      '{"holder":"a","ttlSeconds":1} {"holder":"b"}',
      'acquire',
      'request body must contain one JSON object',
    ],
    [
      'trailing garbage',
      '{"holder":"a","ttlSeconds":1}x',
      'acquire',
      'request body must contain one JSON object',
    ],
  ];
  it.each(failures)('%s', (_name, body, op, message) => {
    expect(decodeBody(body, op)).toEqual({ ok: false, message });
  });

  it('reports the first error in field order, before trailing data', () => {
    expect(decodeBody('{"a":1,"ttlSeconds":"x"} trailing', 'acquire')).toEqual({
      ok: false,
      message: 'invalid json body: json: unknown field "a"',
    });
  });

  it('reports syntax errors as invalid json', () => {
    const res = decodeBody('{"holder":}', 'acquire');
    expect(res.ok).toBe(false);
    expect(!res.ok && res.message.startsWith('invalid json body: ')).toBe(true);
  });
});

describe('validateRequest', () => {
  it('checks holder, then ttl, then the renew token', () => {
    expect(validateRequest('acquire', { ttlSeconds: 0 })).toEqual({
      ok: false,
      message: 'holder is required',
    });
    expect(validateRequest('acquire', { holder: 'h'.repeat(254), ttlSeconds: 0 })).toEqual({
      ok: false,
      message: 'holder must be at most 253 bytes',
    });
    // Bytes, not characters: 127 two-byte characters are 254 bytes.
    expect(validateRequest('acquire', { holder: 'é'.repeat(127), ttlSeconds: 1 })).toEqual({
      ok: false,
      message: 'holder must be at most 253 bytes',
    });
    expect(validateRequest('acquire', { holder: 'h'.repeat(253), ttlSeconds: 1 }).ok).toBe(true);
    expect(validateRequest('acquire', { holder: 'east', ttlSeconds: 0 })).toEqual({
      ok: false,
      message: 'ttlSeconds must be positive',
    });
    expect(validateRequest('renew', { holder: 'east', ttlSeconds: -1 })).toEqual({
      ok: false,
      message: 'ttlSeconds must be positive',
    });
    expect(validateRequest('renew', { holder: 'east', ttlSeconds: 1 })).toEqual({
      ok: false,
      message: 'fencingToken must be non-zero',
    });
    expect(validateRequest('renew', { holder: 'east', ttlSeconds: 1, fencingToken: 3 })).toEqual({
      ok: true,
      value: { holder: 'east', ttlSeconds: 1, fencingToken: 3 },
    });
  });

  it('lets release through with only a holder, even an oversized legacy one', () => {
    expect(validateRequest('release', {})).toEqual({ ok: false, message: 'holder is required' });
    expect(validateRequest('release', { holder: 'h'.repeat(300) })).toEqual({
      ok: true,
      value: { holder: 'h'.repeat(300), ttlSeconds: 0, fencingToken: 0 },
    });
  });
});

describe('validateKey', () => {
  it('accepts DNS label namespaces and DNS subdomain names', () => {
    expect(validateKey('pipeline', 'ingest')).toBeUndefined();
    expect(validateKey('a', 'b.c-d.e')).toBeUndefined();
    expect(validateKey('n'.repeat(63), 'x'.repeat(189))).toBeUndefined();
  });

  it('rejects a dotted namespace (#94) and other bad namespaces', () => {
    for (const ns of ['a.b', 'A', '-a', 'a-', 'a_b', 'a/b', 'n'.repeat(64)])
      expect(validateKey(ns, 'x')).toMatch(
        new RegExp(
          `^invalid namespace ${JSON.stringify(ns).replace(/\./g, '\\.')}: must be an RFC 1123 DNS label`,
        ),
      );
  });

  it('rejects bad names', () => {
    for (const name of ['A', 'a..b', '.a', 'a.', 'a/b', 'x'.repeat(254)])
      expect(validateKey('ns', name)).toMatch(/^invalid name ".*": must be an RFC 1123 DNS subdomain/);
  });

  it('limits namespace + "." + name to 253 characters', () => {
    expect(validateKey('n'.repeat(63), 'x'.repeat(190))).toBe(
      `invalid key ${'n'.repeat(63)}/${'x'.repeat(190)}: namespace and name joined with '.' must be at most 253 characters, got 254`,
    );
  });
});
