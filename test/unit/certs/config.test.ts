import { describe, expect, it } from 'vitest';
import { CERT_FLAGS, certFlags, parseCertConfig } from '../../../certs/config.ts';
import { serviceDnsNames } from '../../../certs/create.ts';
import { type CommandSpec, helpText, parseFlags, UsageError } from '../../../src/cli.ts';

const spec: CommandSpec = { name: 'run', summary: 'Run the operator', flags: certFlags };
const parse = (argv: string[], env: NodeJS.ProcessEnv = {}) => parseCertConfig(parseFlags(spec, argv, env));

describe('certificate flags', () => {
  it('has documented defaults', () => {
    expect(parse([])).toEqual({
      certMode: 'selfsigned',
      certDir: '/tmp/k8s-webhook-server/serving-certs',
      webhookServiceName: 'berth-operator-webhook',
      certCaSecretName: 'berth-operator-webhook-ca',
      certLeafValidity: 7 * 86_400_000,
      certCaValidity: 365 * 86_400_000,
    });
    const help = helpText('berth-operator', spec);
    expect(help).toContain('--cert-mode <string>');
    expect(help).toContain('(default: selfsigned) [env BERTH_CERT_MODE]');
    expect(help).toContain('(default: /tmp/k8s-webhook-server/serving-certs) [env BERTH_CERT_DIR]');
    expect(help).toContain('(default: 168h) [env BERTH_CERT_LEAF_VALIDITY]');
  });

  it('reads flags and environment variables', () => {
    expect(parse(['--cert-mode=files', '--cert-dir', '/certs'])).toMatchObject({
      certMode: 'files',
      certDir: '/certs',
    });
    expect(
      parse([], {
        BERTH_CERT_MODE: 'files',
        BERTH_WEBHOOK_SERVICE_NAME: 'hook',
        BERTH_CERT_LEAF_VALIDITY: '1h',
      }),
    ).toMatchObject({ certMode: 'files', webhookServiceName: 'hook', certLeafValidity: 3_600_000 });
  });

  it('rejects bad values in one line naming the flag', () => {
    const error = (argv: string[]): string => {
      try {
        parse(argv);
      } catch (err) {
        expect(err).toBeInstanceOf(UsageError);
        return (err as Error).message;
      }
      throw new Error('expected a UsageError');
    };
    expect(error(['--cert-mode=cert-manager'])).toMatch(/^invalid value "cert-manager" for --cert-mode: /);
    expect(error(['--cert-dir='])).toBe('invalid value "" for --cert-dir: must not be empty');
    expect(error(['--webhook-service-name=9hook'])).toMatch(
      /^invalid value "9hook" for --webhook-service-name: must be a DNS-1035 label/,
    );
    expect(error(['--cert-ca-secret-name=Bad_Name'])).toMatch(
      /for --cert-ca-secret-name: must be a DNS subdomain/,
    );
    expect(error(['--cert-leaf-validity=30s'])).toBe(
      'invalid value "30000" for --cert-leaf-validity: must be at least 1m',
    );
    expect(error(['--cert-leaf-validity=168h', '--cert-ca-validity=336h'])).toBe(
      'invalid value "1209600000" for --cert-ca-validity: must be at least 3 x --cert-leaf-validity',
    );
  });

  it('keeps FlagDef rows and FlagSpecs in step', () => {
    expect(certFlags.map((f) => f.name)).toEqual(Object.keys(CERT_FLAGS));
    for (const flag of certFlags)
      expect(flag.env).toBe(`BERTH_${flag.name.toUpperCase().replace(/-/g, '_')}`);
  });
});

describe('serviceDnsNames', () => {
  it('lists the names a client may use for the Service, the one the API server verifies first', () => {
    expect(serviceDnsNames('hook', 'berth-system')).toEqual([
      'hook.berth-system.svc',
      'hook',
      'hook.berth-system',
      'hook.berth-system.svc.cluster.local',
    ]);
    expect(serviceDnsNames('hook', 'ns', 'corp.example')).toContain('hook.ns.svc.corp.example');
  });
});
