import { describe, expect, it } from 'vitest';
import { matchesLabelSelector, matchesLabels, parseLabelSelector } from '../../../src/kube/labels.ts';

const matches = (selector: string, labels?: Record<string, string>) =>
  matchesLabels(parseLabelSelector(selector), labels);

describe('label selectors', () => {
  it('matches equality, inequality, existence and sets like apimachinery', () => {
    const labels = { 'app.kubernetes.io/name': 'aether-agent', tier: 'node' };
    expect(matches('app.kubernetes.io/name=aether-agent', labels)).toBe(true);
    expect(matches('app.kubernetes.io/name==aether-agent', labels)).toBe(true);
    expect(matches('app.kubernetes.io/name=other', labels)).toBe(false);
    expect(matches('app.kubernetes.io/name=aether-agent', undefined)).toBe(false);
    expect(matches('tier!=node', labels)).toBe(false);
    expect(matches('missing!=x', labels)).toBe(true);
    expect(matches('tier', labels)).toBe(true);
    expect(matches('!tier', labels)).toBe(false);
    expect(matches('!missing', labels)).toBe(true);
    expect(matches('tier in (node, edge)', labels)).toBe(true);
    expect(matches('tier notin (node)', labels)).toBe(false);
    expect(matches('missing notin (node)', labels)).toBe(true);
    expect(matches('tier in (edge),app.kubernetes.io/name=aether-agent', labels)).toBe(false);
    expect(matches('', labels)).toBe(true);
  });

  it('normalises the text sent to the API server', () => {
    expect(parseLabelSelector(' a = b , c in ( x , y ) , ! d ').text).toBe('a=b,c in (x,y),!d');
  });

  it.each(['a in (b', 'a in ()', 'a=b,,c', 'a b', 'Bad Key=x', 'a=b c', 'a=(b)', '-a=b'])(
    'rejects %j',
    (text) => {
      expect(() => parseLabelSelector(text)).toThrow();
    },
  );
});

describe('matchesLabelSelector', () => {
  it('implements matchLabels and the four operators', () => {
    const labels = { a: '1', b: '2' };
    expect(matchesLabelSelector(undefined, labels)).toBe(true);
    expect(matchesLabelSelector({}, labels)).toBe(true);
    expect(matchesLabelSelector({ matchLabels: { a: '1' } }, labels)).toBe(true);
    expect(matchesLabelSelector({ matchLabels: { a: '2' } }, labels)).toBe(false);
    expect(
      matchesLabelSelector({ matchExpressions: [{ key: 'a', operator: 'In', values: ['1'] }] }, labels),
    ).toBe(true);
    expect(
      matchesLabelSelector({ matchExpressions: [{ key: 'c', operator: 'In', values: ['1'] }] }, labels),
    ).toBe(false);
    expect(
      matchesLabelSelector({ matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['1'] }] }, labels),
    ).toBe(false);
    expect(
      matchesLabelSelector({ matchExpressions: [{ key: 'c', operator: 'NotIn', values: ['1'] }] }, labels),
    ).toBe(true);
    expect(matchesLabelSelector({ matchExpressions: [{ key: 'a', operator: 'Exists' }] }, labels)).toBe(true);
    expect(matchesLabelSelector({ matchExpressions: [{ key: 'a', operator: 'DoesNotExist' }] }, labels)).toBe(
      false,
    );
    expect(matchesLabelSelector({ matchExpressions: [{ key: 'a', operator: 'Bogus' }] }, labels)).toBe(false);
  });
});
