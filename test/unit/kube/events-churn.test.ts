// Regression (issue 32): under churn of objects that never recur (BerthLeases created and deleted under
// new names, as the soak does), the EventRecorder kept every series until maxTracked (4096) pushed it
// out, so an operator's heap after GC grew with each new lease for hours. Series past their window are
// now dropped at the next event: what is tracked follows the event rate times the window, and the heap
// after a full GC stays flat. The lease reporter drops a deleted lease's transition counters with its
// held gauge, so the registry does not keep a series per lease ever deleted.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import type { BerthLease } from '../../../src/berth/api.ts';
import { LeaseReporter } from '../../../src/berth/lease-reporter.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { EventRecorder, type EventSink } from '../../../src/kube/events.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const heapAfterGc = (): number => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

const sink: EventSink = {
  create: async () => ({}),
  patch: async () => ({}),
};

describe('EventRecorder under churn of new objects', () => {
  it('tracks what the window holds, and its heap after GC stays flat', async () => {
    const clock = new ManualClock();
    const rec = new EventRecorder({
      sink,
      reportingController: 'berth.skaphos.io/berth-operator',
      reportingInstance: 'replica-1',
      clock,
    });
    const windowS = 6 * 60;
    let n = 0;
    const churn = async (events: number): Promise<void> => {
      for (let i = 0; i < events; i++, n++) {
        // One event a second, each about a BerthLease of its own that never recurs.
        clock.advance(1_000);
        await rec.normal(
          {
            apiVersion: 'berth.skaphos.io/v1alpha1',
            kind: 'BerthLease',
            name: `w-${n}`,
            namespace: 'team-a',
            uid: `uid-${n}`,
          },
          'Acquired',
          'Acquire',
          `acquired lease team-a/w-${n} with fencing token ${n} ${'x'.repeat(200)}`,
        );
      }
    };
    await churn(1_000);
    const early = heapAfterGc();
    await churn(3_000);
    const late = heapAfterGc();
    expect(rec.tracked).toBeLessThanOrEqual(windowS + 1);
    // 3,000 series of ~1 KB each were kept before the fix: ~3 MB. Now the same ~360 as before.
    expect(late - early).toBeLessThan(1_000_000);
  });
});

describe('LeaseReporter.forget', () => {
  it("drops the deleted lease's transition counters with its held gauge", async () => {
    const registry = createRegistry({ defaultMetrics: false });
    const reporter = new LeaseReporter(undefined, registry);
    const lease = (name: string, held: boolean): BerthLease =>
      ({
        apiVersion: 'berth.skaphos.io/v1alpha1',
        kind: 'BerthLease',
        metadata: { name, namespace: 'team-a' },
        spec: {},
        status: held ? { leaseState: 'held', currentHolder: 'c', fencingToken: 1 } : {},
      }) as unknown as BerthLease;
    for (let i = 0; i < 50; i++) {
      reporter.written(undefined, lease(`w-${i}`, true));
      reporter.released(lease(`w-${i}`, false));
      reporter.forget('team-a', `w-${i}`);
    }
    const series = async (name: string): Promise<number> =>
      (await registry.getSingleMetric(name)?.get())?.values.length ?? 0;
    expect(await series('berth_lease_held')).toBe(0);
    expect(await series('berth_lease_transitions_total')).toBe(0);
  });
});
