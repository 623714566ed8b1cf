// `berth-operator central` flags of the OIDC auth mode and the log format: defaults, the settings they
// describe, and one-line errors for every misuse.
import { describe, expect, it } from 'vitest';
import { centralCommand, oidcConfigOf, parseCentralFlags, runCentral } from '../../../src/central/command.ts';
import { parseFlags, UsageError } from '../../../src/cli.ts';

const parse = (argv: string[]) => parseCentralFlags(parseFlags(centralCommand, argv));
const tls = ['--tls-cert-file', '/c', '--tls-key-file', '/k'];
const oidc = [
  ...tls,
  '--auth-mode',
  'oidc',
  '--oidc-issuer-url',
  'https://issuer.example.com',
  '--oidc-audience',
  'berth',
];

function usageError(argv: string[]): string {
  try {
    parse(argv);
  } catch (err) {
    if (err instanceof UsageError) return err.message;
    throw err;
  }
  throw new Error(`no UsageError for ${JSON.stringify(argv)}`);
}

describe('central OIDC and log flags', () => {
  it('default to the Go server values', () => {
    expect(parse(tls)).toMatchObject({
      'oidc-issuer-url': '',
      'oidc-audience': '',
      'oidc-jwks-url': '',
      'oidc-username-claim': 'sub',
      'oidc-tenant-claim': 'sub',
      'oidc-required-claim': [],
      'log-format': 'json',
    });
    expect(parse([...tls, '--log-format', 'text'])['log-format']).toBe('text');
  });

  it('describe the OIDC settings, required claims collected from every occurrence', () => {
    const flags = parse([
      ...oidc,
      '--oidc-jwks-url=https://keys.example.com/jwks',
      '--oidc-username-claim=email',
      '--oidc-tenant-claim=groups',
      '--oidc-required-claim',
      'env=prod',
      '--oidc-required-claim=team=ops=1',
    ]);
    expect(oidcConfigOf(flags)).toEqual({
      issuerUrl: 'https://issuer.example.com',
      audience: 'berth',
      jwksUrl: 'https://keys.example.com/jwks',
      usernameClaim: 'email',
      tenantClaim: 'groups',
      requiredClaims: { env: 'prod', team: 'ops=1' },
    });
    // A durable store does not then need an API keys file; a loopback issuer may be plain http.
    const loopback = parse([...oidc, '--oidc-issuer-url', 'http://127.0.0.1:5556']);
    expect(loopback['oidc-issuer-url']).toBe('http://127.0.0.1:5556');
    expect(parse([...oidc, '--store-backend', 'postgres', '--sql-dsn', 'x'])['auth-mode']).toBe('oidc');
  });

  const bad: Array<[string[], string]> = [
    [[...tls, '--auth-mode', 'oidc'], '--oidc-issuer-url is required with --auth-mode oidc'],
    [
      [...tls, '--auth-mode', 'oidc', '--oidc-issuer-url', 'https://issuer.example.com'],
      '--oidc-audience is required with --auth-mode oidc',
    ],
    [
      [...oidc, '--oidc-issuer-url', 'http://issuer.example.com'],
      '--oidc-issuer-url must be https (http only on localhost)',
    ],
    [[...oidc, '--oidc-jwks-url', 'keys.json'], '--oidc-jwks-url must be an absolute URL'],
    [[...oidc, '--oidc-required-claim', 'env'], '--oidc-required-claim want key=value, got "env"'],
    [
      [...oidc, '--oidc-required-claim', 'env=a', '--oidc-required-claim', 'env=b'],
      '--oidc-required-claim claim "env" is given twice',
    ],
    [[...oidc, '--oidc-username-claim', ''], '--oidc-username-claim must not be empty'],
    [[...oidc, '--oidc-tenant-claim='], '--oidc-tenant-claim must not be empty'],
    [
      [...oidc, '--api-keys-file', '/keys'],
      '--api-keys-file is only used with --auth-mode static-keys (the auth mode is oidc)',
    ],
    [
      [...tls, '--oidc-issuer-url', 'https://issuer.example.com'],
      '--oidc-issuer-url is only used with --auth-mode oidc (the auth mode is none)',
    ],
    [
      [...tls, '--auth-mode', 'static-keys', '--api-keys-file', '/k', '--oidc-required-claim', 'env=prod'],
      '--oidc-required-claim is only used with --auth-mode oidc (the auth mode is static-keys)',
    ],
    [
      [
        ...tls,
        '--store-backend',
        'k8s',
        '--coordination-namespace',
        'x',
        '--api-keys-file',
        '/k',
        '--oidc-tenant-claim',
        'groups',
      ],
      '--oidc-tenant-claim is only used with --auth-mode oidc (the auth mode is static-keys)',
    ],
    [[...tls, '--auth-mode', 'ldap'], '--auth-mode must be one of: none, static-keys, oidc'],
    [[...tls, '--log-format', 'pretty'], '--log-format must be one of: json, text'],
  ];
  it.each(bad)('reject %j', (argv, message) => {
    expect(usageError(argv)).toBe(`central: ${message}`);
  });

  it('print a bad log format as one line and return exit code 2', async () => {
    let err = '';
    const code = await runCentral(parseFlags(centralCommand, [...tls, '--log-format', 'logfmt']), {
      stderr: { write: (s: string) => (err += s) } as unknown as NodeJS.WritableStream,
    });
    expect(code).toBe(2);
    expect(err).toBe('berth-operator: central: --log-format must be one of: json, text\n');
  });
});
