// `berth-operator helper <acquire|renew|check>`: flags over the environment, then the command. Exit codes:
// 0 done (check: healthy), 1 failed (check: unhealthy), 2 a bad flag, variable or combination (one line).
// main.ts loads this module for `helper` before anything else, so the helper never loads the Kubernetes
// client, zod or pino (docs/helper.md §1).
import { type FlagValues, formatDuration, helpText, parseFlags, UsageError } from '../cli.ts';
import { DEFAULT_STATE_DIR, ENV, MARKER_FILE } from '../injection/contract.ts';
import { RESTART_POD_EXIT_CODE } from '../injection/restart-pod.ts';
import { realClock } from '../kube/clock.ts';
import { holdLease } from './acquire.ts';
import { createHelperClient, HelperStartError } from './client.ts';
import { configFromEnv, type HelperConfig, HelperConfigError, resolveConfig, withFlags } from './config.ts';
import { type Enforcer, MarkerEnforcer, SignalEnforcer } from './enforce.ts';
import { createHelperLog, type HelperLog } from './log.ts';
import { startProbeServer } from './probe-server.ts';
import { osProcTable } from './procs.ts';
import { Sidecar } from './renew.ts';
import { HELPER_COMMAND, HELPER_SUBCOMMANDS, type HelperSubcommand, subcommandSpec } from './spec.ts';
import { evaluateMarker, HelperState, markerReason } from './state.ts';

const PROGRAM = 'berth-operator';

export interface HelperIO {
  env: NodeJS.ProcessEnv;
  stdout(text: string): void;
  stderr(text: string): void;
  /**
   * Ends the process with `code` at once: a sidecar restarting its Pod must not wait for a handle to
   * close while its app still runs.
   */
  exit(code: number): void;
}

const processIO: HelperIO = {
  env: process.env,
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  exit: (code) => process.exit(code),
};

function usage(): string {
  return [
    `Usage: ${PROGRAM} ${HELPER_COMMAND} <${HELPER_SUBCOMMANDS.join('|')}> [flags]`,
    '',
    ...HELPER_SUBCOMMANDS.map((sub) => `  ${sub.padEnd(9)}${subcommandSpec(sub).summary}`),
    '',
    `Run "${PROGRAM} ${HELPER_COMMAND} <command> --help" for the flags.`,
    '',
  ].join('\n');
}

/** Splits `check`'s marker argument from its flags: a word that is not the value of a flag before it. */
export function splitPositionals(
  sub: HelperSubcommand,
  args: string[],
): { flags: string[]; positionals: string[] } {
  const spec = subcommandSpec(sub);
  const takesValue = new Set(spec.flags.filter((f) => f.kind !== 'boolean').map((f) => `--${f.name}`));
  const flags: string[] = [];
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg.startsWith('--')) {
      flags.push(arg);
      if (!arg.includes('=') && takesValue.has(arg) && i + 1 < args.length) flags.push(args[++i]!);
    } else positionals.push(arg);
  }
  return { flags, positionals };
}

export async function runHelper(args: string[], io: HelperIO = processIO): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === undefined || sub === '--help' || sub === '-h') {
    io.stdout(usage());
    return sub === undefined ? 2 : 0;
  }
  if (!(HELPER_SUBCOMMANDS as readonly string[]).includes(sub)) {
    io.stderr(
      `${PROGRAM}: ${HELPER_COMMAND}: unknown command "${sub}" (commands: ${HELPER_SUBCOMMANDS.join(', ')})\n`,
    );
    return 2;
  }
  const command = sub as HelperSubcommand;
  const spec = subcommandSpec(command);
  if (rest.includes('--help') || rest.includes('-h')) {
    io.stdout(helpText(PROGRAM, spec));
    return 0;
  }
  const fail = (message: string, code: number): number => {
    io.stderr(`${PROGRAM}: ${spec.name}: ${message}\n`);
    return code;
  };
  let flags: FlagValues;
  let positionals: string[];
  try {
    const split = splitPositionals(command, rest);
    positionals = split.positionals;
    if (positionals.length > (command === 'check' ? 1 : 0))
      throw new UsageError(
        command === 'check'
          ? `accepts at most 1 argument (the marker path), received ${positionals.length}`
          : `unexpected argument "${positionals[0]}"`,
      );
    flags = parseFlags({ ...spec, name: spec.name }, split.flags);
  } catch (err) {
    if (err instanceof UsageError) return fail(err.message.replace(`${spec.name}: `, ''), 2);
    throw err;
  }
  if (command === 'check') return check(flags, positionals[0], io);

  let config: HelperConfig;
  try {
    config = resolveConfig(withFlags(configFromEnv(io.env), flags));
    if (command === 'renew' && config.mode !== 'runtime-singleton')
      throw new HelperConfigError(`renew requires mode=runtime-singleton, got ${config.mode}`);
  } catch (err) {
    if (err instanceof HelperConfigError) return fail(err.message, 2);
    throw err;
  }
  const log = createHelperLog({ write: io.stdout });
  try {
    return command === 'acquire'
      ? await acquire(config, flags['acquire-timeout'] as number, log)
      : await renew(config, log, io);
  } catch (err) {
    if (err instanceof HelperStartError) return fail(err.message, 1);
    throw err;
  }
}

/** Resolves on SIGTERM or SIGINT; the returned function stops listening. */
function onTermination(handler: (signal: NodeJS.Signals) => void): () => void {
  const listener = (signal: NodeJS.Signals): void => handler(signal);
  process.once('SIGTERM', listener);
  process.once('SIGINT', listener);
  return () => {
    process.off('SIGTERM', listener);
    process.off('SIGINT', listener);
  };
}

async function acquire(config: HelperConfig, timeoutMs: number, log: HelperLog): Promise<number> {
  const client = await createHelperClient(config, log);
  const controller = new AbortController();
  const stopListening = onTermination((signal) => controller.abort(new Error(`interrupted by ${signal}`)));
  const timer =
    timeoutMs > 0
      ? setTimeout(
          () => controller.abort(new Error(`lease not acquired within ${formatDuration(timeoutMs)}`)),
          timeoutMs,
        )
      : undefined;
  try {
    await holdLease(config, {
      client,
      state: new HelperState(config.stateDir),
      clock: realClock,
      log,
      signal: controller.signal,
    });
    return 0;
  } catch (err) {
    log.error('berth-acquire failed', { error: `acquire: ${(err as Error).message}` });
    return 1;
  } finally {
    clearTimeout(timer);
    stopListening();
    client.close();
  }
}

function enforcerFor(config: HelperConfig, state: HelperState, log: HelperLog): Enforcer {
  if (config.enforce !== 'signal') return new MarkerEnforcer(state);
  return new SignalEnforcer(state, config.signalTarget, config.enforceGraceMs, {
    procs: osProcTable(),
    kill: (pid, signal) => process.kill(pid, signal),
    clock: realClock,
    log,
  });
}

async function renew(config: HelperConfig, log: HelperLog, io: HelperIO): Promise<number> {
  const client = await createHelperClient(config, log);
  const state = new HelperState(config.stateDir);
  // A signal, or the sidecar asking for the Pod's restart (restartPodOnLoss).
  let stop!: (why: NodeJS.Signals | 'restart-pod') => void;
  const stopped = new Promise<NodeJS.Signals | 'restart-pod'>((resolve) => {
    stop = resolve;
  });
  const sidecar = new Sidecar(config, {
    client,
    state,
    enforcer: enforcerFor(config, state, log),
    clock: realClock,
    log,
    restartPod: () => stop('restart-pod'),
  });
  const stopListening = onTermination((signal) => stop(signal));
  let server: Awaited<ReturnType<typeof startProbeServer>>;
  try {
    server = await startProbeServer(config.probePort, () => sidecar.probe());
  } catch (err) {
    stopListening();
    client.close();
    throw new HelperStartError(`probe server on port ${config.probePort}: ${(err as Error).message}`);
  }
  log.info('probe server listening', { port: server.port });
  try {
    await sidecar.start();
    const why = await stopped;
    // The lease is lost or unproven: nothing to release, and every moment counts against the lead.
    if (why === 'restart-pod') {
      io.exit(RESTART_POD_EXIT_CODE);
      return RESTART_POD_EXIT_CODE;
    }
    log.info('shutting down', { signal: why });
    await sidecar.stop();
    return 0;
  } finally {
    stopListening();
    await server.close();
    client.close();
  }
}

/** Go's check: the marker from the argument, else <--state-dir | BERTH_STATE_DIR | /berth>/healthy. */
async function check(flags: FlagValues, marker: string | undefined, io: HelperIO): Promise<number> {
  const dir = (flags['state-dir'] as string | undefined) || io.env[ENV.stateDir] || DEFAULT_STATE_DIR;
  const path = marker !== undefined && marker !== '' ? marker : `${dir}/${MARKER_FILE}`;
  const verdict = await evaluateMarker(path, flags['max-age'] as number, Date.now);
  if (verdict.ok) return 0;
  io.stderr(`${markerReason(verdict, path)}\n`);
  return 1;
}
