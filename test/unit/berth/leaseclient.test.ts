import { describe, expect, it } from 'vitest';
import {
  decodeLeaseResponse,
  errorDetails,
  HttpLeaseClient,
  parseWireTime,
  TokenSource,
} from '../../../src/berth/leaseclient.ts';

describe('parseWireTime', () => {
  it('parses RFC 3339 with any fraction precision and offsets', () => {
    expect(parseWireTime('2026-09-07T10:00:30Z')).toBe(Date.UTC(2026, 8, 7, 10, 0, 30));
    expect(parseWireTime('2026-09-07T10:00:30.123456789Z')).toBe(Date.UTC(2026, 8, 7, 10, 0, 30, 123));
    expect(parseWireTime('2026-09-07T10:00:30.5Z')).toBe(Date.UTC(2026, 8, 7, 10, 0, 30, 500));
    expect(parseWireTime('2026-09-07T12:00:30+02:00')).toBe(Date.UTC(2026, 8, 7, 10, 0, 30));
    expect(parseWireTime('2026-09-07T05:30:30-04:30')).toBe(Date.UTC(2026, 8, 7, 10, 0, 30));
  });

  it("reads Go's zero time (and empty) as absent", () => {
    expect(parseWireTime('0001-01-01T00:00:00Z')).toBeUndefined();
    expect(parseWireTime('')).toBeUndefined();
    expect(parseWireTime(undefined)).toBeUndefined();
  });

  it('rejects garbage', () => {
    expect(() => parseWireTime('yesterday')).toThrow('invalid time "yesterday"');
    expect(() => parseWireTime('2026-09-07 10:00:30')).toThrow();
  });
});

describe('decodeLeaseResponse', () => {
  it('decodes acquired and refused answers, with omitted fields as empty', () => {
    expect(
      decodeLeaseResponse(
        '{"acquired":true,"holder":"cluster-east","fencingToken":7,"expiresAt":"2026-09-07T10:00:30Z","acquiredAt":"2026-09-07T09:00:00Z"}',
      ),
    ).toEqual({
      acquired: true,
      holder: 'cluster-east',
      fencingToken: 7,
      expiresAt: Date.UTC(2026, 8, 7, 10, 0, 30),
      acquiredAt: Date.UTC(2026, 8, 7, 9),
    });
    expect(
      decodeLeaseResponse(
        '{"acquired":false,"expiresAt":"0001-01-01T00:00:00Z","acquiredAt":"0001-01-01T00:00:00Z"}',
      ),
    ).toEqual({ acquired: false, holder: '', fencingToken: 0, expiresAt: undefined, acquiredAt: undefined });
  });

  it('rejects malformed answers', () => {
    expect(() => decodeLeaseResponse('<html>')).toThrow('response is not JSON');
    expect(() => decodeLeaseResponse('{"holder":"x"}')).toThrow('unexpected response: acquired');
    expect(() => decodeLeaseResponse('{"acquired":true,"fencingToken":"7"}')).toThrow('fencingToken');
    expect(() => decodeLeaseResponse('{"acquired":true,"expiresAt":"soon"}')).toThrow('invalid time');
  });
});

describe('errorDetails', () => {
  it('takes the envelope message and request id, else the text', () => {
    expect(errorDetails('{"error":"internal error","requestId":"abc"}\n')).toEqual({
      serverMessage: 'internal error',
      requestId: 'abc',
    });
    expect(errorDetails('404 page not found\n')).toEqual({
      serverMessage: '404 page not found',
      requestId: undefined,
    });
    expect(errorDetails('x'.repeat(600)).serverMessage).toHaveLength(515);
  });
});

describe('construction', () => {
  it('rejects both key sources, bad URLs, and every scheme but https', () => {
    expect(() => new TokenSource({ apiKey: 'a', apiKeyFile: '/f' })).toThrow('mutually exclusive');
    expect(() => new HttpLeaseClient({ baseUrl: 'not a url' })).toThrow(
      'invalid berth API server URL "not a url"',
    );
    expect(() => new HttpLeaseClient({ baseUrl: 'ftp://x' })).toThrow(
      'must be an https:// URL, e.g. https://berth.example.com',
    );
    expect(() => new HttpLeaseClient({ baseUrl: 'http://127.0.0.1:8443' })).toThrow(
      'invalid berth API server URL "http://127.0.0.1:8443": must be an https:// URL, not http://: the bearer token would cross the network in clear text',
    );
    expect(() => new HttpLeaseClient({ baseUrl: 'https://user:pw@x' })).toThrow('credentials');
  });

  it('fails every call, without a request, when no URL is configured', async () => {
    const client = new HttpLeaseClient({ baseUrl: '' });
    await expect(client.ping()).rejects.toMatchObject({
      kind: 'config',
      message: 'ping: no berth API server URL is configured',
    });
    await expect(client.acquire('ns', 'n', 'h', 30)).rejects.toMatchObject({ kind: 'config' });
  });
});
