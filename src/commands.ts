// Every subcommand: its flag specs (for --help and the generated README tables) and how it runs.
import { centralCommand, runCentral } from './central/command.ts';
import type { CommandSpec } from './cli.ts';
import { helperCommand } from './helper/spec.ts';
import { oidcBrokerCommand } from './oidc-broker/spec.ts';
import { runCommand, runOperator } from './run.ts';

export interface Command {
  spec: CommandSpec;
  /** Resolves with the process exit code. */
  run(flags: Record<string, unknown>): Promise<number>;
}

export const COMMANDS: readonly Command[] = [
  { spec: runCommand, run: (flags) => runOperator(flags as never) },
  { spec: centralCommand, run: (flags) => runCentral(flags as never) },
];

/** Every command's flags, `helper`'s and `oidc-broker`'s included: main.ts runs them without loading this module. */
export const COMMAND_SPECS: readonly CommandSpec[] = [
  ...COMMANDS.map((c) => c.spec),
  helperCommand,
  oidcBrokerCommand,
];
