// `npm run docs`: regenerates the flag tables in README.md from the commands' flag specs, so every default
// is documented in one place and cannot drift (test/unit/docs.test.ts fails when README is stale).
import { readFileSync, writeFileSync } from 'node:fs';
import type { CommandSpec } from '../src/cli.ts';
import { COMMAND_SPECS } from '../src/commands.ts';

const cell = (text: string): string =>
  text.replaceAll('|', '\\|').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

export function flagsTable(spec: CommandSpec): string {
  const rows = spec.flags.map((f) => {
    const def = f.default === undefined || f.default === '' ? '' : `\`${String(f.default)}\``;
    const help = f.repeatable ? `${f.help} (repeatable)` : f.help;
    return `| \`--${f.name}\` | ${def} | ${f.env ? `\`${f.env}\`` : ''} | ${cell(help)} |`;
  });
  return ['| flag | default | env | meaning |', '|---|---|---|---|', ...rows].join('\n');
}

const marker = (name: string, edge: 'start' | 'end'): string => `<!-- flags:${name}:${edge} -->`;

/** README with every `<!-- flags:<command>:start/end -->` block replaced by the current table. */
export function renderReadme(readme: string, commands: readonly CommandSpec[] = COMMAND_SPECS): string {
  let out = readme;
  for (const spec of commands) {
    const start = marker(spec.name, 'start');
    const end = marker(spec.name, 'end');
    const from = out.indexOf(start);
    const to = out.indexOf(end);
    if (from < 0 || to < from) throw new Error(`README.md lacks the ${start} ... ${end} block`);
    out = `${out.slice(0, from + start.length)}\n${flagsTable(spec)}\n${out.slice(to)}`;
  }
  return out;
}

if (import.meta.main) {
  const path = new URL('../README.md', import.meta.url);
  writeFileSync(path, renderReadme(readFileSync(path, 'utf8')));
}
