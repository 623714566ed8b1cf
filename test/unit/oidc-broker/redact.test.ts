// The broker's last line of defence for its log (src/oidc-broker/command.ts Redactor): the client secret,
// in every form a message could carry it, and the last two tokens never reach a line.
import { describe, expect, it } from 'vitest';
import { REDACTED, Redactor } from '../../../src/oidc-broker/command.ts';

describe('Redactor', () => {
  it('masks the secret as given, JSON-escaped and form-escaped', () => {
    const r = new Redactor();
    r.addSecret('s"e c\\ret');
    const line = JSON.stringify({ msg: 'x', error: 'echo s"e c\\ret and s%22e+c%5Cret' });
    expect(r.redact(line)).toBe(JSON.stringify({ msg: 'x', error: `echo ${REDACTED} and ${REDACTED}` }));
    expect(r.redact(line)).not.toMatch(/e c/);
  });

  it('masks the current and the previous token, not older ones', () => {
    const r = new Redactor();
    for (const t of ['tok-1', 'tok-2', 'tok-3']) r.addToken(t);
    expect(r.redact('tok-1 tok-2 tok-3')).toBe(`tok-1 ${REDACTED} ${REDACTED}`);
  });

  it('masks a longer secret containing a token whole', () => {
    const r = new Redactor();
    r.addToken('abc');
    r.addSecret('xxabcxx');
    expect(r.redact('xxabcxx abc')).toBe(`${REDACTED} ${REDACTED}`);
  });
});
