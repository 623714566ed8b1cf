import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  authorize,
  bearerToken,
  isUsableIdentity,
  parseKeyFile,
  StaticKeyAuthenticator,
  sha256Hex,
} from '../../../src/central/auth.ts';

const HASH_A = sha256Hex('token-a');
const HASH_B = sha256Hex('token-b');

describe('bearerToken', () => {
  it('accepts only a non-empty "Bearer " token', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken(undefined)).toBeUndefined();
    expect(bearerToken('Bearer ')).toBeUndefined();
    expect(bearerToken('bearer abc')).toBeUndefined();
    expect(bearerToken('Basic abc')).toBeUndefined();
    expect(bearerToken('Bearerabc')).toBeUndefined();
  });
});

describe('isUsableIdentity', () => {
  it('fails closed on a missing identity and on an empty or "/"-holding tenant', () => {
    expect(isUsableIdentity({ holder: 'east', tenant: 'east' })).toBe(true);
    expect(isUsableIdentity({ holder: 'ops@east', tenant: 'east' })).toBe(true);
    expect(isUsableIdentity(undefined)).toBe(false);
    expect(isUsableIdentity(null)).toBe(false);
    expect(isUsableIdentity({ holder: 'east', tenant: '' })).toBe(false);
    expect(isUsableIdentity({ holder: 'east', tenant: 'east/evil' })).toBe(false);
    expect(isUsableIdentity({ holder: 'east', tenant: '/' })).toBe(false);
  });
});

describe('authorize', () => {
  it('requires the holder to be the tenant or under "<tenant>/"', () => {
    const id = { holder: 'east', tenant: 'east' };
    expect(authorize(id, 'any-namespace', 'east')).toBeUndefined();
    expect(authorize(id, 'ns', 'east/pod-1')).toBeUndefined();
    expect(authorize(id, 'ns', 'west')).toBe('holder not authorized for this identity');
    expect(authorize(id, 'ns', 'eastern')).toBe('holder not authorized for this identity');
    expect(authorize(id, 'ns', 'east-1/x')).toBe('holder not authorized for this identity');
  });
});

describe('parseKeyFile', () => {
  it('parses ids and hashes, skipping comments and blank lines', () => {
    const keys = parseKeyFile(`# operators\n\ncluster-east:${HASH_A}\r\n  cluster-west : ${HASH_B}  \n`);
    expect([...keys]).toEqual([
      [HASH_A, 'cluster-east'],
      [HASH_B, 'cluster-west'],
    ]);
  });

  const bad: Array<[string, string, RegExp]> = [
    ['no colon', 'cluster-east', /line 1: want <key-id>:<sha256-hex>/],
    ['empty id', `:${HASH_A}`, /line 1: key id is empty/],
    ['slash in id', `a/b:${HASH_A}`, /line 1: key id must not contain "\/"/],
    ['short hash', 'a:abc', /line 1: hash must be 64 lower-case hex digits/],
    ['upper-case hash', `a:${HASH_A.toUpperCase()}`, /line 1: hash must be 64 lower-case hex digits/],
    ['duplicate hash', `a:${HASH_A}\n# x\nb:${HASH_A}`, /line 3: duplicate key hash/],
    ['no keys', '# nothing\n', /contains no keys/],
  ];
  it.each(bad)('rejects %s', (_name, text, message) => {
    expect(() => parseKeyFile(text)).toThrow(message);
  });

  it('never echoes a line in its errors', () => {
    expect(() => parseKeyFile('secret-looking-line')).toThrow(/^api keys file line 1: want/);
  });
});

describe('StaticKeyAuthenticator', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('authenticates by token hash and reloads, keeping the old keys when the new file is bad', async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-keys-'));
    const path = join(dir, 'keys');
    await writeFile(path, `east:${HASH_A}\n`);
    const auth = await StaticKeyAuthenticator.load(path);
    expect(auth.authenticate('token-a')).toEqual({ holder: 'east', tenant: 'east' });
    expect(auth.authenticate('token-b')).toBeUndefined();

    await writeFile(path, `west:${HASH_B}\n`);
    expect(await auth.reload()).toBe(true);
    expect(auth.authenticate('token-a')).toBeUndefined();
    expect(auth.authenticate('token-b')).toEqual({ holder: 'west', tenant: 'west' });

    await writeFile(path, 'garbage\n');
    expect(await auth.reload()).toBe(false);
    expect(auth.authenticate('token-b')).toEqual({ holder: 'west', tenant: 'west' });
    await rm(path);
    expect(await auth.reload()).toBe(false);
    expect(auth.authenticate('token-b')).toEqual({ holder: 'west', tenant: 'west' });
  });

  it('fails to load a missing file', async () => {
    await expect(StaticKeyAuthenticator.load('/nonexistent/keys')).rejects.toThrow(
      'read api keys file /nonexistent/keys: ENOENT',
    );
  });
});
