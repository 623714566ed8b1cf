import { describe, expect, it } from 'vitest';
import { parseFlags, UsageError } from '../../src/cli.ts';
import { parseFeatureConfigs } from '../../src/features.ts';
import { runCommand } from '../../src/run.ts';

const ADMISSION = [
  '--enable-workload-admission',
  '--workload-operator-namespace=berth-system',
  '--workload-operator-user=system:serviceaccount:berth-system:berth-operator',
];
const CENTRAL = '--berth-api-server=https://berth.example.com';

/** The one-line refusal of `run` with these flags, or 'ok'. */
function verdict(argv: string[]): string {
  try {
    parseFeatureConfigs(parseFlags(runCommand, argv, {}), 'berth-system');
    return 'ok';
  } catch (err) {
    if (err instanceof UsageError) return err.message;
    throw err;
  }
}

describe('feature combinations run refuses', () => {
  it('workload admission without the BerthLease controller (managed Pods would stay gated)', () => {
    expect(verdict(ADMISSION)).toMatch(
      /^--berth-api-server \(BERTH_API_SERVER\) is required with --enable-workload-admission/,
    );
    expect(verdict([...ADMISSION, CENTRAL, '--cluster-id=a'])).toBe('ok');
  });

  it('the controller without a cluster id (every cluster would hold the same lease)', () => {
    expect(verdict([CENTRAL])).toMatch(
      /^--cluster-id \(BERTH_CLUSTER_ID\) is required with --berth-api-server/,
    );
    expect(verdict([...ADMISSION, CENTRAL])).toMatch(/^--cluster-id \(BERTH_CLUSTER_ID\) is required/);
    expect(verdict([CENTRAL, '--cluster-id=east'])).toBe('ok');
  });

  it('a shared spec holder only when asked for, lease-only, and never beside a cluster id', () => {
    expect(verdict([CENTRAL, '--use-spec-holder-identity'])).toBe('ok');
    expect(verdict([CENTRAL, '--use-spec-holder-identity', '--cluster-id=east'])).toMatch(
      /^--use-spec-holder-identity cannot be combined with --cluster-id/,
    );
    expect(verdict([...ADMISSION, CENTRAL, '--use-spec-holder-identity'])).toMatch(
      /^--use-spec-holder-identity cannot be combined with --enable-workload-admission/,
    );
  });

  it('unmanaged webhook configurations with a CA only the operator knows', () => {
    const running = [...ADMISSION, CENTRAL, '--cluster-id=a'];
    expect(verdict([...running, '--webhook-registration=false'])).toMatch(
      /^--webhook-registration=false needs --cert-mode files/,
    );
    expect(verdict([...running, '--webhook-registration=false', '--cert-mode=files'])).toBe('ok');
  });

  it('every refusal is one line', () => {
    for (const argv of [
      ['--node-taint-guard=false'],
      ADMISSION,
      [CENTRAL],
      [CENTRAL, '--use-spec-holder-identity', '--cluster-id=x'],
    ])
      expect(verdict(argv)).not.toContain('\n');
  });
});
