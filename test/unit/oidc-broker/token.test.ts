// The client-credentials grant's rules (src/oidc-broker/token.ts) on a fake transport: the request's form
// and authentication, the answer's parsing (JSON and form, expires_in, errors that never carry a token),
// the header-then-form probe that Go's oauth2 does, and the discovery document's checks.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/kube/clock.ts';
import {
  ClientCredentials,
  discoverTokenEndpoint,
  type HttpAnswer,
  type HttpCall,
  parseTokenAnswer,
  queryEscape,
  TokenError,
  type Transport,
  tokenEndpointOf,
  tokenRequest,
} from '../../../src/oidc-broker/token.ts';

const json = (status: number, body: unknown): HttpAnswer => ({
  status,
  contentType: 'application/json; charset=utf-8',
  body: JSON.stringify(body),
});
const creds = { clientId: 'berth op', clientSecret: 's3cr:et+/', scopes: ['a', 'b'], audience: 'berth-api' };

describe('tokenRequest', () => {
  it('sends Basic credentials form-escaped, as Go does, and the grant, scope and audience', () => {
    const { headers, body } = tokenRequest(creds, 'header');
    expect(Buffer.from(headers.authorization!.replace('Basic ', ''), 'base64').toString()).toBe(
      'berth+op:s3cr%3Aet%2B%2F',
    );
    expect(headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(Object.fromEntries(new URLSearchParams(body))).toEqual({
      grant_type: 'client_credentials',
      scope: 'a b',
      audience: 'berth-api',
    });
  });

  it('puts the credentials into the form in the params style, and omits empty scope and audience', () => {
    const { headers, body } = tokenRequest({ ...creds, scopes: [], audience: '' }, 'params');
    expect(headers.authorization).toBeUndefined();
    expect(Object.fromEntries(new URLSearchParams(body))).toEqual({
      grant_type: 'client_credentials',
      client_id: 'berth op',
      client_secret: 's3cr:et+/',
    });
  });

  it("escapes like Go's url.QueryEscape", () => {
    expect(queryEscape("a b!'()*~._-é")).toBe('a+b%21%27%28%29%2A~._-%C3%A9');
  });
});

describe('parseTokenAnswer', () => {
  it('reads JSON, expires_in as a number or a numeric string', () => {
    expect(parseTokenAnswer(json(200, { access_token: 't', expires_in: 3600 }))).toEqual({
      accessToken: 't',
      expiresInS: 3600,
    });
    expect(parseTokenAnswer(json(200, { access_token: 't', expires_in: '60' })).expiresInS).toBe(60);
    expect(parseTokenAnswer(json(200, { access_token: 't' })).expiresInS).toBeUndefined();
    expect(parseTokenAnswer(json(200, { access_token: 't', expires_in: 1e12 })).expiresInS).toBe(
      2_147_483_647,
    );
  });

  it('reads a form-encoded answer (Go: also text/plain); a bad expires_in there is no expiry', () => {
    const form = (body: string, contentType = 'application/x-www-form-urlencoded'): HttpAnswer => ({
      status: 200,
      contentType,
      body,
    });
    expect(parseTokenAnswer(form('access_token=t&expires_in=90'))).toEqual({
      accessToken: 't',
      expiresInS: 90,
    });
    expect(parseTokenAnswer(form('access_token=t&expires_in=soon', 'text/plain')).expiresInS).toBe(0);
  });

  it.each([
    [
      'an error status with the OAuth error',
      json(401, { error: 'invalid_client', error_description: 'bad' }),
      'token endpoint answered 401 "invalid_client" "bad"',
    ],
    [
      'an error status without a body',
      { status: 503, contentType: 'text/html', body: '<h1>down</h1>' },
      'token endpoint answered 503',
    ],
    [
      'a 200 carrying an error',
      json(200, { error: 'invalid_scope' }),
      'token endpoint answered 200 "invalid_scope"',
    ],
    ['no access_token', json(200, { token_type: 'Bearer' }), 'lacks access_token'],
    ['an empty access_token', json(200, { access_token: '' }), 'lacks access_token'],
    ['a non-string access_token', json(200, { access_token: 7 }), 'not a string'],
    ['a fractional expires_in', json(200, { access_token: 't', expires_in: 1.5 }), 'not an integer'],
    ['no JSON', { status: 200, contentType: 'application/json', body: 'nope' }, 'not a JSON object'],
  ])('refuses %s', (_what, answer, message) => {
    expect(() => parseTokenAnswer(answer)).toThrow(TokenError);
    expect(() => parseTokenAnswer(answer)).toThrow(message);
  });

  it('never puts an answer body other than the error fields into the message', () => {
    let message = '';
    try {
      parseTokenAnswer(json(500, { access_token: 'leaked-token', note: 'x' }));
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toBe('token endpoint answered 500');
  });

  it('bounds a long error description', () => {
    const answer = json(400, { error: 'invalid_request', error_description: 'x'.repeat(1000) });
    expect(() => parseTokenAnswer(answer)).toThrow(/x{200}…"$/);
  });
});

/** A transport answering from a script, recording the calls. */
function scripted(
  answers: Array<HttpAnswer | Error>,
): Transport & { calls: Array<{ url: string } & HttpCall> } {
  const calls: Array<{ url: string } & HttpCall> = [];
  return {
    calls,
    async request(url, call) {
      calls.push({ url, ...call });
      const next = answers.shift();
      if (next === undefined) throw new Error('no more answers');
      if (next instanceof Error) throw next;
      return next;
    },
  };
}

const styleOf = (call: HttpCall): string => (call.headers.authorization ? 'header' : 'params');

describe('ClientCredentials', () => {
  const signal = new AbortController().signal;

  it('counts the expiry from the answer on its clock, and keeps the header style once it worked', async () => {
    const clock = new ManualClock();
    const transport = scripted([
      json(200, { access_token: 'a', expires_in: 60 }),
      json(200, { access_token: 'b' }),
    ]);
    const client = new ClientCredentials('https://i/token', creds, transport, clock);
    expect(await client.token(signal)).toEqual({ accessToken: 'a', expiresAt: clock.now() + 60_000 });
    expect(client.authStyle).toBe('header');
    expect(await client.token(signal)).toEqual({ accessToken: 'b', expiresAt: undefined });
    expect(transport.calls.map(styleOf)).toEqual(['header', 'header']);
    expect(transport.calls.map((c) => [c.method, c.url])).toEqual([
      ['POST', 'https://i/token'],
      ['POST', 'https://i/token'],
    ]);
  });

  it('retries a failed header attempt with the credentials in the form, and then keeps that style', async () => {
    const transport = scripted([
      json(401, { error: 'invalid_client' }),
      json(200, { access_token: 'a' }),
      json(200, { access_token: 'b' }),
    ]);
    const client = new ClientCredentials('https://i/token', creds, transport, new ManualClock());
    expect((await client.token(signal)).accessToken).toBe('a');
    expect((await client.token(signal)).accessToken).toBe('b');
    expect(transport.calls.map(styleOf)).toEqual(['header', 'params', 'params']);
    expect(client.authStyle).toBe('params');
  });

  it('keeps probing while both styles fail (an outage), and reports the second failure', async () => {
    const transport = scripted([
      json(503, {}),
      json(503, { error: 'temporarily_unavailable' }),
      json(503, {}),
      json(200, { access_token: 'a' }),
    ]);
    const client = new ClientCredentials('https://i/token', creds, transport, new ManualClock());
    await expect(client.token(signal)).rejects.toThrow(
      'token endpoint answered 503 "temporarily_unavailable"',
    );
    expect(client.authStyle).toBeUndefined();
    expect((await client.token(signal)).accessToken).toBe('a');
    expect(transport.calls.map(styleOf)).toEqual(['header', 'params', 'header', 'params']);
  });

  it('does not retry an aborted attempt', async () => {
    const aborted = AbortSignal.abort(new Error('shutting down'));
    const transport = scripted([new Error('aborted'), json(200, { access_token: 'a' })]);
    const client = new ClientCredentials('https://i/token', creds, transport, new ManualClock());
    await expect(client.token(aborted)).rejects.toThrow('aborted');
    expect(transport.calls).toHaveLength(1);
  });
});

describe('discovery', () => {
  const doc = { issuer: 'https://i/realm', token_endpoint: 'https://i/realm/token' };

  it("takes the document's token_endpoint from <issuer>/.well-known/openid-configuration", async () => {
    const transport = scripted([json(200, doc)]);
    await expect(
      discoverTokenEndpoint('https://i/realm/', transport, new AbortController().signal),
    ).rejects.toThrow('names issuer "https://i/realm", want "https://i/realm/"');
    const again = scripted([json(200, doc)]);
    expect(await discoverTokenEndpoint('https://i/realm', again, new AbortController().signal)).toBe(
      'https://i/realm/token',
    );
    expect(again.calls[0]).toMatchObject({
      method: 'GET',
      url: 'https://i/realm/.well-known/openid-configuration',
    });
    expect(transport.calls[0]!.url).toBe('https://i/realm/.well-known/openid-configuration');
  });

  it.each([
    ['another issuer', { ...doc, issuer: 'https://evil' }, /names issuer "https:\/\/evil"/],
    ['no token_endpoint', { issuer: doc.issuer }, /missing token_endpoint/],
    ['an http token_endpoint', { ...doc, token_endpoint: 'http://i/token' }, /must be https/],
  ])('refuses a document with %s', (_what, document, message) => {
    expect(() => tokenEndpointOf(document, 'https://i/realm')).toThrow(message);
  });

  it('names the URL when the issuer answers an error', async () => {
    await expect(
      discoverTokenEndpoint('https://i', scripted([json(503, {})]), new AbortController().signal),
    ).rejects.toThrow('discover https://i/.well-known/openid-configuration: status 503');
  });
});
