// The guard's flags: aether's defaults, env fallbacks, and one-line errors for bad values.
import { describe, expect, it } from 'vitest';
import { type CommandSpec, helpText, parseFlags, UsageError } from '../../../src/cli.ts';
import { NO_EXECUTE_REFUSED, nodeTaintFlags, parseNodeTaintConfig } from '../../../src/nodetaint/config.ts';

const spec: CommandSpec = { name: 'run', summary: 'run', flags: nodeTaintFlags };
const parse = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
  parseNodeTaintConfig(parseFlags(spec, argv, env), { operatorNamespace: 'berth-system' });

function usageError(argv: string[]): string {
  try {
    parse(argv);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as Error).message;
  }
  throw new Error('expected a UsageError');
}

describe('node taint flags', () => {
  it("has aether's defaults", () => {
    const config = parse([]);
    expect(config).toMatchObject({
      enabled: true,
      taint: { key: 'aether.io/agent-not-ready', value: 'true', effect: 'NoSchedule' },
      agentNamespace: 'berth-system',
      graceMs: 30_000,
      fieldManager: 'aether-controller',
    });
    expect(config.agentSelector.text).toBe('app.kubernetes.io/name=aether-agent');
  });

  it('reads every flag, and the environment when a flag is not given', () => {
    const config = parse(
      [
        '--node-taint-guard=false',
        '--taint-key=example.com/not-ready',
        '--taint-value=',
        '--taint-effect=PreferNoSchedule',
        '--agent-namespace=aether',
        '--agent-selector',
        'app in (agent, agent-canary),tier!=test',
      ],
      { BERTH_TAINT_GRACE: '1m30s' },
    );
    expect(config).toMatchObject({
      enabled: false,
      taint: { key: 'example.com/not-ready', value: '', effect: 'PreferNoSchedule' },
      agentNamespace: 'aether',
      graceMs: 90_000,
    });
    expect(config.agentSelector.text).toBe('app in (agent,agent-canary),tier!=test');
  });

  it('refuses NoExecute and says why', () => {
    const message = usageError(['--taint-effect', 'NoExecute']);
    expect(message).toBe(`--taint-effect: ${NO_EXECUTE_REFUSED}`);
    expect(message).toMatch(/evict/);
    expect(message.split('\n')).toHaveLength(1);
  });

  it.each([
    [['--taint-effect', 'Sometimes'], /^--taint-effect: must be NoSchedule or PreferNoSchedule/],
    [['--taint-key', 'Not A Key'], /^--taint-key: must be a qualified name/],
    [['--taint-value', 'a b'], /^--taint-value: /],
    [['--agent-namespace', 'Bad_NS'], /^--agent-namespace: must be a DNS label/],
    [['--agent-selector', ''], /^--agent-selector: must not be empty/],
    [['--agent-selector', 'a in (b'], /^--agent-selector: invalid label selector: unbalanced/],
    [['--taint-grace', '0s'], /^--taint-grace: must be greater than zero/],
  ])('rejects %j in one line', (argv, pattern) => {
    expect(usageError(argv)).toMatch(pattern);
  });

  it('rejects a bad duration when parsing the flags', () => {
    expect(() => parse(['--taint-grace', 'soon'])).toThrow(/--taint-grace: invalid duration/);
  });

  it('lists every flag with its default in --help', () => {
    const help = helpText('berth-operator', spec);
    for (const flag of nodeTaintFlags) expect(help).toContain(`--${flag.name}`);
    expect(help).toContain('(default: aether.io/agent-not-ready) [env BERTH_TAINT_KEY]');
    expect(help).toContain('(default: 30s)');
  });
});
