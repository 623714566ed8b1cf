// Composition root of the berth-operator process: picks the subcommand, parses its flags, runs it.
// `helper` runs in every opted-in Pod and `oidc-broker` beside the operator or a helper: neither loads the
// Kubernetes client, so both are dispatched before the other commands are imported (docs/helper.md §1,
// docs/oidc-broker.md).
import { helpText, parseFlags, programHelp, UsageError } from './cli.ts';
import { HELPER_COMMAND } from './helper/spec.ts';
import { slimClientNode } from './kube/client-node-slim.ts';
import { OIDC_BROKER_COMMAND } from './oidc-broker/spec.ts';

const PROGRAM = 'berth-operator';

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === HELPER_COMMAND) return (await import('./helper/command.ts')).runHelper(rest);
  if (name === OIDC_BROKER_COMMAND) return (await import('./oidc-broker/command.ts')).runOidcBroker(rest);
  slimClientNode();
  const { COMMANDS, COMMAND_SPECS } = await import('./commands.ts');
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(programHelp(PROGRAM, [...COMMAND_SPECS]));
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS.find((c) => c.spec.name === name);
  if (!command) {
    process.stderr.write(
      `${PROGRAM}: unknown command "${name}" (commands: ${COMMAND_SPECS.map((c) => c.name).join(', ')})\n`,
    );
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(helpText(PROGRAM, command.spec));
    return 0;
  }
  let flags: Record<string, unknown>;
  try {
    flags = parseFlags(command.spec, rest, process.env);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`${PROGRAM}: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  return command.run(flags);
}

process.on('unhandledRejection', (reason) => {
  process.stderr.write(
    `${PROGRAM}: unhandled rejection: ${reason instanceof Error ? reason.message : String(reason)}\n`,
  );
  process.exitCode = 1;
});

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`${PROGRAM}: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
