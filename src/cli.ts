// Command-line parsing shared by every subcommand: flags are declared once (name, kind, default, help,
// env var) so `--help` always lists every flag with its default, and a bad flag is one line + exit 2.

export type FlagKind = 'string' | 'boolean' | 'number' | 'duration';

export interface FlagSpec {
  name: string;
  kind: FlagKind;
  default: string | number | boolean | undefined;
  help: string;
  /** Environment variable read when the flag is not given (as one occurrence of a repeatable flag). */
  env?: string;
  /** May be given more than once: the value is the list of every occurrence in order, default empty. */
  repeatable?: boolean;
}

export interface CommandSpec {
  name: string;
  summary: string;
  flags: FlagSpec[];
}

export type FlagScalar = string | number | boolean;
export type FlagValues = Record<string, FlagScalar | FlagScalar[] | undefined>;

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

// Go's time.ParseDuration units, in milliseconds; longest first, so `ms` is not read as `m` + `s`.
const DURATION_UNITS_MS = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 1e-3, µs: 1e-3, ns: 1e-6 } as const;
type DurationUnit = keyof typeof DURATION_UNITS_MS;
const DURATION = /^(\d+(\.\d+)?(h|ms|m|s|us|µs|ns))+$/;
const DURATION_PART = /(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/g;

/** Go durations (`30s`, `1m30s`, `500ms`, `1.5h`, `250us`) in milliseconds, as Go's time.ParseDuration reads them. */
export function parseDuration(text: string): number {
  // Go's time.ParseDuration accepts a bare 0 (and only 0) without a unit.
  if (text === '0') return 0;
  if (!DURATION.test(text))
    throw new UsageError(`invalid duration "${text}": use a number with a unit, e.g. 30s, 1m, 500ms`);
  let total = 0;
  for (const m of text.matchAll(DURATION_PART))
    total += Number(m[1]) * DURATION_UNITS_MS[m[2] as DurationUnit];
  return total;
}

/** Milliseconds as Go's `time.Duration.String` writes them (`30s`, `1m30s`, `300ms`, `1.5s`, `-2s`): logs, notes, messages. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  const sign = ms < 0 ? '-' : '';
  let rest = Math.abs(ms);
  if (rest < 1_000) return `${sign}${trimFraction(rest.toFixed(6))}ms`;
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const secs = trimFraction((rest / 1_000).toFixed(9));
  if (hours > 0) return `${sign}${hours}h${minutes}m${secs}s`;
  if (minutes > 0) return `${sign}${minutes}m${secs}s`;
  return `${sign}${secs}s`;
}

const trimFraction = (text: string): string => (text.includes('.') ? text.replace(/\.?0+$/, '') : text);

function convert(flag: FlagSpec, raw: string, source: string): FlagScalar {
  switch (flag.kind) {
    case 'string':
      return raw;
    case 'boolean':
      if (raw === 'true' || raw === '1') return true;
      if (raw === 'false' || raw === '0') return false;
      throw new UsageError(`invalid value "${raw}" for ${source}: expected true or false`);
    case 'number': {
      const n = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(n))
        throw new UsageError(`invalid value "${raw}" for ${source}: expected a number`);
      return n;
    }
    case 'duration':
      try {
        return parseDuration(raw);
      } catch (err) {
        throw new UsageError(`${source}: ${(err as Error).message}`);
      }
  }
}

/**
 * Parses `--flag value`, `--flag=value` and bare boolean `--flag`; env vars fill flags not given. A
 * repeatable flag collects every occurrence; any other flag given twice keeps the last value.
 */
export function parseFlags(spec: CommandSpec, argv: string[], env: NodeJS.ProcessEnv = {}): FlagValues {
  const byName = new Map(spec.flags.map((f) => [f.name, f]));
  const values: FlagValues = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--') || arg === '--')
      throw new UsageError(`${spec.name}: unexpected argument "${arg}"`);
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq >= 0 ? eq : undefined);
    const flag = byName.get(name);
    if (!flag) throw new UsageError(`${spec.name}: unknown flag --${name}`);
    let raw: string | undefined = eq >= 0 ? arg.slice(eq + 1) : undefined;
    if (raw === undefined) {
      if (flag.kind === 'boolean') raw = 'true';
      else {
        raw = argv[++i];
        if (raw === undefined) throw new UsageError(`${spec.name}: flag --${name} needs a value`);
      }
    }
    const value = convert(flag, raw, `--${name}`);
    const previous = values[name];
    values[name] = flag.repeatable ? [...(Array.isArray(previous) ? previous : []), value] : value;
  }
  for (const flag of spec.flags) {
    if (values[flag.name] !== undefined) continue;
    const fromEnv = flag.env ? env[flag.env] : undefined;
    if (fromEnv !== undefined && fromEnv !== '') {
      const value = convert(flag, fromEnv, flag.env!);
      values[flag.name] = flag.repeatable ? [value] : value;
    } else if (flag.repeatable) values[flag.name] = [];
    else
      values[flag.name] =
        flag.kind === 'duration' && typeof flag.default === 'string'
          ? parseDuration(flag.default)
          : flag.default;
  }
  return values;
}

export function helpText(program: string, spec: CommandSpec): string {
  const rows = spec.flags.map((f) => {
    const placeholder = f.kind === 'boolean' ? '' : ` <${f.kind}>`;
    const def = f.default === undefined || f.default === '' ? '(none)' : String(f.default);
    const env = f.env ? ` [env ${f.env}]` : '';
    const repeat = f.repeatable ? ' (repeatable)' : '';
    return [`  --${f.name}${placeholder}`, `${f.help}${repeat} (default: ${def})${env}`] as const;
  });
  const width = Math.max(...rows.map(([left]) => left.length), 10) + 2;
  return [
    `Usage: ${program} ${spec.name} [flags]`,
    '',
    spec.summary,
    '',
    'Flags:',
    ...rows.map(([left, right]) => `${left.padEnd(width)}${right}`),
    `  --help${' '.repeat(Math.max(2, width - 8))}Show this help`,
    '',
  ].join('\n');
}

export function programHelp(program: string, commands: CommandSpec[]): string {
  const width = Math.max(...commands.map((c) => c.name.length)) + 4;
  return [
    `Usage: ${program} <command> [flags]`,
    '',
    'Commands:',
    ...commands.map((c) => `  ${c.name.padEnd(width)}${c.summary}`),
    '',
    `Run "${program} <command> --help" for the flags of a command.`,
    '',
  ].join('\n');
}

/**
 * One command line, the way every entry point reads it (the subcommands, the npm scripts, hack/): the
 * flags, or the exit code once `--help` (0) or a usage error (2, one line on stderr) has been written.
 */
export function readCommandLine(
  program: string,
  spec: CommandSpec,
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): FlagValues | number {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(helpText(program, spec));
    return 0;
  }
  try {
    return parseFlags(spec, argv, env);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`${program}: ${err.message}\n`);
    return 2;
  }
}
