import type { EventsV1Event } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { KubeApiError } from '../../../src/kube/client.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import {
  EventRecorder,
  type EventRecorderOptions,
  type EventSink,
  eventKey,
  eventName,
  referenceFor,
  truncateUtf8,
} from '../../../src/kube/events.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { PodBuilder } from '../../builders/pod.ts';

const flush = async (n = 10): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe('helpers', () => {
  it('truncates notes to a byte budget without splitting characters', () => {
    expect(truncateUtf8('short', 1024)).toBe('short');
    const long = 'é'.repeat(600); // 1200 bytes
    const cut = truncateUtf8(long, 1024);
    expect(Buffer.byteLength(cut, 'utf8')).toBeLessThanOrEqual(1024);
    expect(cut.endsWith('...')).toBe(true);
    expect(cut).not.toContain('\uFFFD');
  });

  it('derives references from objects and keeps given references', () => {
    expect(
      referenceFor({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'd', namespace: 'ns', uid: 'u1', resourceVersion: '5' },
      }),
    ).toEqual({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: 'd',
      namespace: 'ns',
      uid: 'u1',
      resourceVersion: '5',
    });
    expect(referenceFor({ kind: 'Node', name: 'n1', apiVersion: 'v1' })).toEqual({
      kind: 'Node',
      name: 'n1',
      apiVersion: 'v1',
    });
  });

  it('keys isomorphic events alike regardless of note, and apart by reason/action/regarding', () => {
    const r = { kind: 'Pod', name: 'p', namespace: 'ns', uid: 'u' };
    const k = eventKey('ctl', r, undefined, 'Act', 'Why');
    expect(eventKey('ctl', { ...r }, undefined, 'Act', 'Why')).toBe(k);
    expect(eventKey('ctl', r, undefined, 'Act', 'Other')).not.toBe(k);
    expect(eventKey('ctl', r, undefined, 'Other', 'Why')).not.toBe(k);
    expect(eventKey('ctl', { ...r, uid: 'v' }, undefined, 'Act', 'Why')).not.toBe(k);
    expect(eventKey('ctl', r, { kind: 'Node', name: 'n' }, 'Act', 'Why')).not.toBe(k);
  });

  it('names events <name>.<hex nanoseconds>, unique and within 253 characters', () => {
    const now = Date.UTC(2026, 0, 1);
    expect(eventName('pod', now, 0)).toBe(`pod.${(BigInt(now) * 1_000_000n).toString(16)}`);
    expect(eventName('pod', now, 1)).not.toBe(eventName('pod', now, 0));
    expect(eventName('x'.repeat(253), now, 0).length).toBeLessThanOrEqual(253);
  });
});

interface Call {
  op: 'create' | 'patch';
  namespace: string;
  name: string;
  body: Record<string, unknown>;
}

class FakeSink implements EventSink {
  readonly calls: Call[] = [];
  readonly failures: Array<(call: Call) => unknown> = [];
  readonly existing = new Set<string>();
  gate: Promise<void> | undefined;

  async create(namespace: string, event: EventsV1Event): Promise<unknown> {
    const body = JSON.parse(JSON.stringify(event)) as Record<string, unknown>;
    const name = event.metadata?.name ?? '';
    return this.#handle({ op: 'create', namespace, name, body }, () =>
      this.existing.add(`${namespace}/${name}`),
    );
  }

  async patch(namespace: string, name: string, patch: Record<string, unknown>): Promise<unknown> {
    const call: Call = { op: 'patch', namespace, name, body: JSON.parse(JSON.stringify(patch)) };
    return this.#handle(call, () => {
      if (!this.existing.has(`${namespace}/${name}`)) {
        throw new KubeApiError(404, { code: 404, reason: 'NotFound', message: 'events not found' });
      }
    });
  }

  async #handle(call: Call, apply: () => void): Promise<unknown> {
    this.calls.push(call);
    if (this.gate) await this.gate;
    const failure = this.failures.shift();
    if (failure) throw failure(call);
    apply();
    return {};
  }
}

function recorder(options: Partial<EventRecorderOptions> = {}) {
  const clock = new ManualClock();
  const sink = new FakeSink();
  const lines: string[] = [];
  const logger = createLogger({ level: 'debug', destination: { write: (l: string) => void lines.push(l) } });
  const rec = new EventRecorder({
    sink,
    reportingController: 'berth.skaphos.io/berth-operator',
    reportingInstance: 'replica-1',
    clock,
    logger,
    ...options,
  });
  return { rec, sink, clock, lines };
}

const pod = new PodBuilder('p').namespace('ns').uid('u1').obj();

describe('EventRecorder', () => {
  it('creates an events.k8s.io/v1 Event with a MicroTime eventTime and reporting fields', async () => {
    const { rec, sink } = recorder();
    await rec.record(pod, { type: 'Warning', reason: 'LeaseLost', action: 'StopWorkload', note: 'lost it' });
    expect(sink.calls).toHaveLength(1);
    const { op, namespace, body } = sink.calls[0] as Call;
    expect(op).toBe('create');
    expect(namespace).toBe('ns');
    expect(body).toMatchObject({
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      eventTime: '2026-01-01T00:00:00.000000Z',
      reportingController: 'berth.skaphos.io/berth-operator',
      reportingInstance: 'replica-1',
      regarding: { apiVersion: 'v1', kind: 'Pod', name: 'p', namespace: 'ns', uid: 'u1' },
      reason: 'LeaseLost',
      action: 'StopWorkload',
      type: 'Warning',
      note: 'lost it',
    });
    expect(body.series).toBeUndefined();
  });

  it('puts events about cluster-scoped objects in the default namespace', async () => {
    const { rec, sink } = recorder();
    await rec.normal({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' } }, 'Tainted', 'Taint');
    expect(sink.calls[0]?.namespace).toBe('default');
  });

  it('folds repeats into a series by patching count and lastObservedTime', async () => {
    const { rec, sink, clock } = recorder();
    await rec.record(pod, { type: 'Normal', reason: 'Synced', action: 'Sync', note: 'one' });
    clock.advance(1500);
    await rec.record(pod, {
      type: 'Normal',
      reason: 'Synced',
      action: 'Sync',
      note: 'different note, same event',
    });
    clock.advance(1500);
    await rec.record(pod, { type: 'Normal', reason: 'Synced', action: 'Sync' });
    expect(sink.calls.map((c) => c.op)).toEqual(['create', 'patch', 'patch']);
    const name = sink.calls[0]?.name;
    expect(sink.calls.every((c) => c.name === name)).toBe(true);
    expect(sink.calls[1]?.body).toEqual({
      series: { count: 2, lastObservedTime: '2026-01-01T00:00:01.500000Z' },
    });
    expect(sink.calls[2]?.body).toEqual({
      series: { count: 3, lastObservedTime: '2026-01-01T00:00:03.000000Z' },
    });
  });

  it('coalesces a burst: at most one write in flight per series, ending at the latest count', async () => {
    const { rec, sink } = recorder();
    let open!: () => void;
    sink.gate = new Promise((resolve) => {
      open = resolve;
    });
    const all = Array.from({ length: 50 }, () => rec.warning(pod, 'Failing', 'Reconcile'));
    await flush();
    expect(sink.calls).toHaveLength(1);
    sink.gate = undefined;
    open();
    await Promise.all(all);
    expect(sink.calls.map((c) => c.op)).toEqual(['create', 'patch']);
    expect(sink.calls[1]?.body).toMatchObject({ series: { count: 50 } });
  });

  it('starts a new Event once the series window has passed', async () => {
    const { rec, sink, clock } = recorder({ seriesWindowMs: 60_000 });
    await rec.normal(pod, 'Synced', 'Sync');
    clock.advance(60_001);
    await rec.normal(pod, 'Synced', 'Sync');
    expect(sink.calls.map((c) => c.op)).toEqual(['create', 'create']);
    expect(sink.calls[0]?.name).not.toBe(sink.calls[1]?.name);
  });

  it('recreates the Event when the patch finds it gone (TTL), restarting the count', async () => {
    const { rec, sink } = recorder();
    await rec.normal(pod, 'Synced', 'Sync');
    sink.existing.clear();
    await rec.normal(pod, 'Synced', 'Sync');
    expect(sink.calls.map((c) => c.op)).toEqual(['create', 'patch', 'create']);
    expect(sink.calls[2]?.name).not.toBe(sink.calls[0]?.name);
    await rec.normal(pod, 'Synced', 'Sync');
    expect(sink.calls[3]).toMatchObject({
      op: 'patch',
      name: sink.calls[2]?.name,
      body: { series: { count: 2 } },
    });
  });

  it('retries transient failures with backoff and gives up on others, never rejecting', async () => {
    const { rec, sink, clock, lines } = recorder({ retryDelayMs: 100 });
    sink.failures.push(
      () => new KubeApiError(503, { code: 503, reason: 'ServiceUnavailable' }),
      () => new TypeError('fetch failed'),
    );
    const done = rec.normal(pod, 'Synced', 'Sync');
    await flush();
    await clock.advanceAsync(100);
    await clock.advanceAsync(200);
    await done;
    expect(sink.calls.map((c) => c.op)).toEqual(['create', 'create', 'create']);

    sink.failures.push(() => new KubeApiError(403, { code: 403, reason: 'Forbidden', message: 'no' }));
    await expect(
      rec.warning({ ...pod, metadata: { ...pod.metadata, name: 'q' } }, 'X', 'Y'),
    ).resolves.toBeUndefined();
    expect(sink.calls).toHaveLength(4);
    expect(lines.some((l) => l.includes('giving up') && l.includes('403 Forbidden'))).toBe(true);
  });

  it('treats AlreadyExists on a retried create as success', async () => {
    const { rec, sink, clock } = recorder({ retryDelayMs: 10 });
    sink.failures.push(
      () => new TypeError('socket hang up'),
      () => new KubeApiError(409, { code: 409, reason: 'AlreadyExists' }),
    );
    const done = rec.normal(pod, 'Synced', 'Sync');
    await flush();
    await clock.advanceAsync(10);
    await done;
    sink.existing.add(`ns/${sink.calls[0]?.name}`);
    await rec.normal(pod, 'Synced', 'Sync');
    expect(sink.calls.map((c) => c.op)).toEqual(['create', 'create', 'patch']);
  });

  it('never throws for bad input', async () => {
    const { rec, sink, lines } = recorder();
    await expect(rec.normal({ metadata: {} }, 'R', 'A')).resolves.toBeUndefined();
    await expect(
      rec.record(pod, { type: 'Bogus' as 'Normal', reason: 'R', action: 'A' }),
    ).resolves.toBeUndefined();
    await expect(rec.record(pod, { type: 'Normal', reason: '', action: 'A' })).resolves.toBeUndefined();
    expect(sink.calls).toHaveLength(0);
    expect(lines.filter((l) => l.includes('cannot record event'))).toHaveLength(3);
  });

  it('is bounded: tracked series and outstanding writes', async () => {
    const { rec, sink } = recorder({ maxTracked: 3, maxPendingWrites: 2 });
    for (let i = 0; i < 5; i++)
      await rec.normal({ ...pod, metadata: { ...pod.metadata, name: `p${i}` } }, 'R', 'A');
    expect(rec.tracked).toBe(3);
    let open!: () => void;
    sink.gate = new Promise((resolve) => {
      open = resolve;
    });
    const before = sink.calls.length;
    const writes = [0, 1, 2, 3].map((i) =>
      rec.normal({ ...pod, metadata: { ...pod.metadata, name: `x${i}` } }, 'R', 'A'),
    );
    await flush();
    expect(sink.calls.length - before).toBe(2);
    open();
    await Promise.all(writes);
    await rec.flush();
  });

  it('truncates the note to 1 kB and reason/action to 128 characters', async () => {
    const { rec, sink } = recorder();
    await rec.record(pod, {
      type: 'Normal',
      reason: 'R'.repeat(200),
      action: 'A'.repeat(200),
      note: 'n'.repeat(5000),
    });
    const body = sink.calls[0]?.body as { note: string; reason: string; action: string };
    expect(Buffer.byteLength(body.note)).toBeLessThanOrEqual(1024);
    expect(body.reason).toHaveLength(128);
    expect(body.action).toHaveLength(128);
  });
});
