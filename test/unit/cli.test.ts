// The shared flag parser: repeatable flags (every occurrence kept, in order) next to ordinary ones.
import { describe, expect, it } from 'vitest';
import {
  type CommandSpec,
  formatDuration,
  helpText,
  parseDuration,
  parseFlags,
  UsageError,
} from '../../src/cli.ts';

const spec: CommandSpec = {
  name: 'demo',
  summary: 'test',
  flags: [
    {
      name: 'claim',
      kind: 'string',
      default: undefined,
      repeatable: true,
      help: 'A key=value',
      env: 'DEMO_CLAIM',
    },
    { name: 'port', kind: 'number', default: undefined, repeatable: true, help: 'A port' },
    { name: 'mode', kind: 'string', default: 'a', help: 'A mode' },
  ],
};

describe('parseFlags: repeatable flags', () => {
  it('collects every occurrence in order, in both --flag value and --flag=value forms', () => {
    expect(parseFlags(spec, ['--claim', 'a=1', '--mode', 'b', '--claim=b=2', '--claim', 'a=1'])).toEqual({
      claim: ['a=1', 'b=2', 'a=1'],
      port: [],
      mode: 'b',
    });
  });

  it('converts each occurrence by the flag kind and reports the bad one', () => {
    expect(parseFlags(spec, ['--port', '80', '--port=443']).port).toEqual([80, 443]);
    expect(() => parseFlags(spec, ['--port', '80', '--port', 'x'])).toThrow(
      new UsageError('invalid value "x" for --port: expected a number'),
    );
  });

  it('defaults to an empty list; its env var counts as one occurrence and only when the flag is absent', () => {
    expect(parseFlags(spec, []).claim).toEqual([]);
    expect(parseFlags(spec, [], { DEMO_CLAIM: 'x=1,y=2' }).claim).toEqual(['x=1,y=2']);
    expect(parseFlags(spec, ['--claim', 'z=3'], { DEMO_CLAIM: 'x=1' }).claim).toEqual(['z=3']);
  });

  it('keeps the last value of a flag that is not repeatable', () => {
    expect(parseFlags(spec, ['--mode', 'b', '--mode', 'c']).mode).toBe('c');
  });

  it('says in --help which flags are repeatable', () => {
    const help = helpText('prog', spec);
    expect(help).toMatch(
      /--claim <string>\s+A key=value \(repeatable\) \(default: \(none\)\) \[env DEMO_CLAIM\]/,
    );
    expect(help).toMatch(/--mode <string>\s+A mode \(default: a\)\n/);
  });
});

describe('parseDuration', () => {
  it('reads Go durations, a bare 0 included, and refuses a number without a unit', () => {
    expect(parseDuration('0')).toBe(0);
    expect(parseDuration('1m30s')).toBe(90_000);
    expect(parseDuration('250ms')).toBe(250);
    expect(parseDuration('1h2m3s4ms')).toBe(3_723_004);
    expect(parseDuration('1.5h')).toBe(5_400_000);
    expect(parseDuration('1500us')).toBe(1.5);
    expect(parseDuration('2000000ns')).toBe(2);
    expect(parseDuration('500µs')).toBe(0.5);
    expect(() => parseDuration('5')).toThrow(UsageError);
    expect(() => parseDuration('-1s')).toThrow(UsageError);
  });
});

describe('formatDuration', () => {
  it("writes milliseconds as Go's time.Duration.String does, and parseDuration reads them back", () => {
    const cases: [number, string][] = [
      [0, '0s'],
      [300, '300ms'],
      [1500, '1.5s'],
      [30_000, '30s'],
      [90_000, '1m30s'],
      [3_600_000, '1h0m0s'],
      [-2_000, '-2s'],
    ];
    for (const [ms, text] of cases) {
      expect(formatDuration(ms)).toBe(text);
      if (ms >= 0) expect(parseDuration(text)).toBe(ms);
    }
    expect(formatDuration(10_000 / 3)).toBe('3.333333333s');
  });
});
