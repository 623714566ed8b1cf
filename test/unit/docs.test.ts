import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderReadme } from '../../scripts/docs.ts';
import { COMMAND_SPECS } from '../../src/commands.ts';

describe('README flag tables', () => {
  it('document every flag of every command with its default (run `npm run docs` to refresh)', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    expect(renderReadme(readme)).toBe(readme);
    for (const spec of COMMAND_SPECS)
      for (const flag of spec.flags) expect(readme).toContain(`\`--${flag.name}\``);
  });
});
