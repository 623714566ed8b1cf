// The admission flags: defaults, env fallbacks, validation and the docs/behaviour.md §4.1 start-up check.
import { describe, expect, it } from 'vitest';
import { parseFlags, UsageError } from '../../../src/cli.ts';
import { checkWorkloadOperatorIdentity, parseWebhookConfig, webhookFlags } from '../../../webhooks/flags.ts';

const spec = { name: 'run', summary: '', flags: webhookFlags };
const parse = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
  parseWebhookConfig(parseFlags(spec, argv, env));

describe('webhook flags', () => {
  it('defaults', () => {
    expect(parse([])).toEqual({
      webhookPort: 9443,
      webhookConfigurationName: 'berth-operator-injection-workloads',
      webhookRegistration: true,
      enableWorkloadAdmission: false,
      workloadAdmissionScope: 'opt-in',
      workloadOperatorUser: '',
      workloadOperatorNamespace: '',
    });
  });

  it('takes the admission scope: opt-in (default) or all, as flag or environment', () => {
    expect(parse(['--workload-admission-scope=all']).workloadAdmissionScope).toBe('all');
    expect(parse([], { BERTH_WORKLOAD_ADMISSION_SCOPE: 'all' }).workloadAdmissionScope).toBe('all');
    expect(() => parse(['--workload-admission-scope=some'])).toThrow(
      new UsageError('invalid value "some" for --workload-admission-scope: must be opt-in or all'),
    );
  });

  it('enables workload admission with a matching service account', () => {
    expect(
      parse([
        '--enable-workload-admission',
        '--workload-operator-user=system:serviceaccount:berth-system:berth-operator',
        '--workload-operator-namespace',
        'berth-system',
        '--webhook-port=10443',
      ]),
    ).toMatchObject({
      webhookPort: 10443,
      enableWorkloadAdmission: true,
      workloadOperatorUser: 'system:serviceaccount:berth-system:berth-operator',
      workloadOperatorNamespace: 'berth-system',
    });
  });

  it('reads the environment', () => {
    expect(
      parse([], {
        BERTH_ENABLE_WORKLOAD_ADMISSION: 'true',
        BERTH_WORKLOAD_OPERATOR_USER: 'system:serviceaccount:ops:op',
        BERTH_WORKLOAD_OPERATOR_NAMESPACE: 'ops',
        BERTH_WEBHOOK_PORT: '9444',
      }),
    ).toMatchObject({ enableWorkloadAdmission: true, webhookPort: 9444 });
  });

  it('refuses to start with a mismatched operator identity (spec §4.1 message)', () => {
    const message =
      'workload admission requires its operator namespace and matching service-account username';
    for (const argv of [
      ['--enable-workload-admission'],
      ['--enable-workload-admission', '--workload-operator-namespace=ops'],
      ['--enable-workload-admission', '--workload-operator-user=system:serviceaccount:ops:op'],
      [
        '--enable-workload-admission',
        '--workload-operator-user=system:serviceaccount:other:op',
        '--workload-operator-namespace=ops',
      ],
      [
        '--enable-workload-admission',
        '--workload-operator-user=system:serviceaccount:ops:',
        '--workload-operator-namespace=ops',
      ],
      ['--enable-workload-admission', '--workload-operator-user=alice', '--workload-operator-namespace=ops'],
      [
        '--enable-workload-admission',
        '--workload-operator-user=system:serviceaccount:ops:op:x',
        '--workload-operator-namespace=ops',
      ],
    ]) {
      expect(() => parse(argv), argv.join(' ')).toThrow(new UsageError(message));
    }
    // Disabled, the identity flags are not checked.
    expect(parse(['--workload-operator-user=alice']).enableWorkloadAdmission).toBe(false);
  });

  it('one-line errors name the flag', () => {
    expect(() => parse(['--webhook-port=70000'])).toThrow(
      'invalid value "70000" for --webhook-port: must be a port (0-65535)',
    );
    expect(() => parse(['--webhook-port=1.5'])).toThrow(
      'invalid value "1.5" for --webhook-port: must be a whole number',
    );
    expect(() => parse(['--webhook-configuration-name=Bad_Name'])).toThrow(
      /^invalid value "Bad_Name" for --webhook-configuration-name: must be a DNS subdomain/,
    );
  });

  it('checkWorkloadOperatorIdentity', () => {
    expect(checkWorkloadOperatorIdentity('system:serviceaccount:ops:op', 'ops')).toBeUndefined();
    expect(checkWorkloadOperatorIdentity('system:serviceaccount:ops:op', '')).toBeDefined();
  });
});
