// Composition root of the berth-operator process: picks the subcommand, parses its flags, runs it.
import { helpText, parseFlags, programHelp, UsageError } from './cli.ts';
import { COMMANDS } from './commands.ts';

const PROGRAM = 'berth-operator';

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(
      programHelp(
        PROGRAM,
        COMMANDS.map((c) => c.spec),
      ),
    );
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS.find((c) => c.spec.name === name);
  if (!command) {
    process.stderr.write(
      `${PROGRAM}: unknown command "${name}" (commands: ${COMMANDS.map((c) => c.spec.name).join(', ')})\n`,
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
