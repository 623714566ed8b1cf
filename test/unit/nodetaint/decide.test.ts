// The pure decision: aether's order and semantics (docs/nodetaint.md §2.3-§2.4), and the grace window measured from the agent Pods'
// Ready condition (so that it survives a leader change).
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  decideTaint,
  type GraceMemory,
  hasTaint,
  isServingAgent,
  notReadySince,
  TAINTED,
} from '../../../src/nodetaint/decide.ts';
import { agentPod, GRACE_MS, NODE, node, TAINT, timestamp } from './fixtures.ts';

const config = { taintKey: TAINT.key, graceMs: GRACE_MS };
/** A whole second, as Kubernetes timestamps are. */
const T0 = Date.UTC(2026, 4, 1, 12, 0, 0);
const waiting = (firstSeen: number, afterTaint = false): GraceMemory => ({
  state: 'waiting',
  firstSeen,
  afterTaint,
});

describe('decision order (aether spec §2.3)', () => {
  it('1. node gone -> forget, whatever else', () => {
    const d = decideTaint(undefined, [agentPod('a', NODE, false)], T0, config, waiting(T0 - GRACE_MS));
    expect(d).toEqual({ action: 'forget', reason: 'node-gone', memory: undefined });
  });

  it('2. no agent pod object on the node -> forget, even when tainted or past an old window', () => {
    const pods = [agentPod('b', 'node-b', false)];
    expect(decideTaint(node(NODE, true), pods, T0, config)).toMatchObject({ reason: 'no-agent-pod' });
    expect(decideTaint(node(NODE, false), pods, T0, config, waiting(T0 - 10 * GRACE_MS))).toEqual({
      action: 'forget',
      reason: 'no-agent-pod',
      memory: undefined,
    });
  });

  it('3. a Ready agent pod -> forget, before looking at the taint (never removes it)', () => {
    const d = decideTaint(node(NODE, true), [agentPod('a', NODE, true)], T0, config, TAINTED);
    expect(d).toEqual({ action: 'forget', reason: 'agent-ready', memory: undefined });
  });

  it('3. any one Ready, non-terminating pod is enough (surge roll)', () => {
    const pods = [agentPod('old', NODE, false, { terminating: true }), agentPod('new', NODE, true)];
    expect(decideTaint(node(NODE, false), pods, T0, config)).toMatchObject({ reason: 'agent-ready' });
  });

  it('4. the taint key present with any value or effect -> forget, remembering the taint', () => {
    const n = node(NODE, false, [{ key: TAINT.key, value: 'x', effect: 'PreferNoSchedule' }]);
    const d = decideTaint(n, [agentPod('a', NODE, false)], T0, config, waiting(T0 - 10 * GRACE_MS));
    expect(d).toEqual({ action: 'forget', reason: 'already-tainted', memory: TAINTED });
  });

  it('5. first sighting without evidence -> requeue after exactly the grace', () => {
    const d = decideTaint(node(NODE, false), [agentPod('a', NODE, false)], T0, config);
    expect(d).toEqual({
      action: 'wait',
      requeueAfterMs: GRACE_MS,
      window: { start: T0, source: 'first-observation', due: T0 + GRACE_MS },
      memory: waiting(T0),
    });
  });

  it('5./6. later sightings get the remaining time, then arm', () => {
    const pods = [agentPod('a', NODE, false)];
    const mem = waiting(T0);
    expect(decideTaint(node(NODE, false), pods, T0 + 12_345, config, mem)).toMatchObject({
      action: 'wait',
      requeueAfterMs: GRACE_MS - 12_345,
      memory: mem,
    });
    expect(decideTaint(node(NODE, false), pods, T0 + GRACE_MS, config, mem)).toMatchObject({
      action: 'arm',
      memory: mem,
    });
  });
});

describe('what counts as a Ready agent', () => {
  it('is the Ready condition "True" and no deletionTimestamp; phase is ignored', () => {
    expect(isServingAgent(agentPod('a', NODE, true))).toBe(true);
    expect(isServingAgent(agentPod('a', NODE, true, { terminating: true }))).toBe(false);
    expect(isServingAgent(agentPod('a', NODE, false))).toBe(false);
    expect(isServingAgent(agentPod('a', NODE, true, { noCondition: true }))).toBe(false);
    const succeeded = agentPod('a', NODE, false);
    succeeded.status!.phase = 'Succeeded';
    expect(decideTaint(node(NODE, false), [succeeded], T0, config).action).toBe('wait');
  });

  it('uses the first Ready condition', () => {
    const pod = agentPod('a', NODE, true);
    pod.status!.conditions!.push({ type: 'Ready', status: 'False' });
    expect(isServingAgent(pod)).toBe(true);
  });

  it('matches the taint by key only', () => {
    expect(hasTaint(node(NODE, false, [{ key: TAINT.key, effect: 'NoExecute' }]), TAINT.key)).toBe(true);
    expect(hasTaint(node(NODE, false, [{ key: 'other', effect: 'NoSchedule' }]), TAINT.key)).toBe(false);
    expect(hasTaint(node(NODE, false), TAINT.key)).toBe(false);
  });
});

describe('grace window from the Ready condition', () => {
  it('a new leader continues the window instead of restarting it', () => {
    const pods = [agentPod('a', NODE, false, { since: T0 })];
    // Whole-second timestamps stand for the end of their second.
    const d = decideTaint(node(NODE, false), pods, T0 + 10_000, config);
    expect(d).toEqual({
      action: 'wait',
      requeueAfterMs: GRACE_MS - 10_000 + 999,
      window: { start: T0 + 999, source: 'ready-condition', due: T0 + 999 + GRACE_MS },
      memory: waiting(T0 + 10_000),
    });
    expect(decideTaint(node(NODE, false), pods, T0 + 999 + GRACE_MS, config).action).toBe('arm');
    expect(decideTaint(node(NODE, false), pods, T0 + 998 + GRACE_MS, config).action).toBe('wait');
  });

  it('arms on the first sighting when the pod has been NotReady longer than the grace', () => {
    const pods = [agentPod('a', NODE, false, { since: T0 - 5 * GRACE_MS })];
    expect(decideTaint(node(NODE, false), pods, T0, config)).toMatchObject({
      action: 'arm',
      window: { source: 'ready-condition' },
    });
  });

  it('uses sub-second timestamps as they are, Date objects as well as strings', () => {
    const pod = agentPod('a', NODE, false);
    pod.status!.conditions![0]!.lastTransitionTime = new Date(T0 + 250);
    expect(notReadySince(pod, T0 + 1000)).toBe(T0 + 250);
    pod.status!.conditions![0]!.lastTransitionTime = '2026-05-01T12:00:00.250000Z' as unknown as Date;
    expect(notReadySince(pod, T0 + 1000)).toBe(T0 + 250);
    pod.status!.conditions![0]!.lastTransitionTime = 'yesterday' as unknown as Date;
    expect(notReadySince(pod, T0 + 1000)).toBeUndefined();
  });

  it('ignores a transition time in the future: first observation', () => {
    const pods = [agentPod('a', NODE, false, { since: T0 + 5000 })];
    expect(decideTaint(node(NODE, false), pods, T0, config)).toMatchObject({
      requeueAfterMs: GRACE_MS,
      window: { source: 'first-observation' },
    });
  });

  it('a terminating pod still reporting Ready=True gives no evidence: first observation', () => {
    const pods = [agentPod('a', NODE, true, { terminating: true, since: T0 - 10 * GRACE_MS })];
    expect(decideTaint(node(NODE, false), pods, T0, config)).toMatchObject({
      action: 'wait',
      requeueAfterMs: GRACE_MS,
      window: { source: 'first-observation' },
    });
  });

  it('a pod without a Ready condition yet gives no evidence: first observation', () => {
    const pods = [agentPod('a', NODE, false, { noCondition: true })];
    expect(decideTaint(node(NODE, false), pods, T0, config)).toMatchObject({
      requeueAfterMs: GRACE_MS,
      window: { source: 'first-observation' },
    });
  });

  it('needs evidence from every not-Ready pod, and then takes the latest', () => {
    const old = agentPod('old', NODE, false, { since: T0 - 10 * GRACE_MS });
    const fresh = agentPod('new', NODE, false, { since: T0 - 1000 });
    expect(decideTaint(node(NODE, false), [old, fresh], T0, config)).toMatchObject({
      action: 'wait',
      requeueAfterMs: GRACE_MS - 1000 + 999,
    });
    const pending = agentPod('pending', NODE, false, { noCondition: true });
    expect(decideTaint(node(NODE, false), [old, pending], T0, config)).toMatchObject({
      requeueAfterMs: GRACE_MS,
      window: { source: 'first-observation' },
    });
  });

  it('a flap this process missed (evidence newer than its first sighting) restarts the window', () => {
    const pods = [agentPod('a', NODE, false, { since: T0 + 20_000 })];
    const d = decideTaint(node(NODE, false), pods, T0 + 25_000, config, waiting(T0));
    expect(d).toMatchObject({ action: 'wait', window: { start: T0 + 20_999, source: 'ready-condition' } });
  });

  it('after seeing the taint, a window starts no earlier than the first sighting without it (no taint fight)', () => {
    // The agent removed the taint while its Pod still shows the old NotReady transition (kubelet lag).
    const pods = [agentPod('a', NODE, false, { since: T0 - 10 * GRACE_MS })];
    const first = decideTaint(node(NODE, false), pods, T0, config, TAINTED);
    expect(first).toEqual({
      action: 'wait',
      requeueAfterMs: GRACE_MS,
      window: { start: T0, source: 'first-observation', due: T0 + GRACE_MS },
      memory: waiting(T0, true),
    });
    const later = decideTaint(node(NODE, false), pods, T0 + 1000, config, first.memory);
    expect(later).toMatchObject({ action: 'wait', requeueAfterMs: GRACE_MS - 1000 });
    expect(decideTaint(node(NODE, false), pods, T0 + GRACE_MS, config, first.memory).action).toBe('arm');
  });

  it('after seeing the taint, newer evidence still counts', () => {
    const pods = [agentPod('a', NODE, false, { since: T0 + 4000 })];
    const d = decideTaint(node(NODE, false), pods, T0 + 5000, config, waiting(T0, true));
    expect(d).toMatchObject({ window: { start: T0 + 4999, source: 'ready-condition' } });
  });
});

describe('pods of other nodes', () => {
  it('only pods with spec.nodeName equal to the node count', () => {
    const pods: V1Pod[] = [agentPod('b', 'node-b', true), agentPod('c', '', true)];
    expect(decideTaint(node(NODE, false), pods, T0, config).action).toBe('forget');
    expect(decideTaint(node(NODE, false), [...pods, agentPod('a', NODE, false)], T0, config).action).toBe(
      'wait',
    );
  });
});

it('timestamp writes RFC 3339 seconds', () => {
  expect(timestamp(T0)).toBe('2026-05-01T12:00:00Z');
});
