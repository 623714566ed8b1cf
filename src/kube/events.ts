// An events.k8s.io/v1 recorder (client-go tools/events semantics, with a more current series count).
//
// - `eventTime` and `series.lastObservedTime` are MicroTime: RFC 3339 with exactly six fractional
//   digits. kube-apiserver rejects the three digits a plain Date serialises to.
// - Repeats of an isomorphic event (same reportingController, regarding, related, action and reason,
//   as in client-go's getKey; the note is not part of the key) within `seriesWindowMs` of the previous
//   occurrence become a series: the existing Event is merge-patched with `series.count` and
//   `series.lastObservedTime`. client-go patches only the 2nd occurrence and then every 30 min; we
//   patch every change, coalescing bursts into at most one write in flight per series.
// - record() never throws or rejects: failures are logged. Memory and outstanding writes are bounded.
import type { EventsV1Event, KubernetesObject, V1ObjectReference } from '@kubernetes/client-node';
import { V1MicroTime } from '@kubernetes/client-node/dist/types.js';
import type { Logger } from '../observability/logger.ts';
import {
  describeError,
  isAlreadyExists,
  isNotFound,
  readJson,
  resourcePath,
  statusCodeOf,
} from './client.ts';
import { type Clock, realClock } from './clock.ts';
import { formatMicroTime } from './microtime.ts';
import type { KubeRequester } from './transport.ts';

export type EventType = 'Normal' | 'Warning';

/** An object (its reference is derived) or a ready ObjectReference. */
export type Referenceable = KubernetesObject | V1ObjectReference;

export interface EventSpec {
  type: EventType;
  /** Why the action was taken, UpperCamelCase (e.g. `LeaseAcquired`); at most 128 characters. */
  reason: string;
  /** What was done or failed (e.g. `StartWorkload`); at most 128 characters. */
  action: string;
  /** Human-readable detail; truncated to 1 kB. */
  note?: string;
  /** A secondary object (e.g. the Pod a BerthLease acted on). */
  related?: Referenceable;
}

/** Where events are written; `eventSinkFor(transport)` in production, fakes in unit tests. */
export interface EventSink {
  create(namespace: string, event: EventsV1Event): Promise<unknown>;
  /** A JSON merge patch. */
  patch(namespace: string, name: string, patch: Record<string, unknown>): Promise<unknown>;
}

const eventsPath = (namespace: string, name?: string): string =>
  resourcePath({ group: 'events.k8s.io', version: 'v1', plural: 'events', namespace }, name);

/**
 * Events through the process's transport: its connection pool, request timeout and rest_client metrics.
 * The bodies serialise as the API expects: V1MicroTime's toISOString gives the six fractional digits.
 */
export function eventSinkFor(transport: KubeRequester): EventSink {
  return {
    create: async (namespace, body) =>
      readJson(await transport.request({ method: 'POST', path: eventsPath(namespace), body })),
    patch: async (namespace, name, body) =>
      readJson(
        await transport.request({
          method: 'PATCH',
          path: eventsPath(namespace, name),
          body,
          contentType: 'application/merge-patch+json',
        }),
      ),
  };
}

// ---- pure helpers ----

/** Cuts `text` to at most `maxBytes` of UTF-8 without splitting a character. */
export function truncateUtf8(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  const marker = '...';
  let out = '';
  let bytes = 0;
  for (const ch of text) {
    const n = Buffer.byteLength(ch, 'utf8');
    if (bytes + n > maxBytes - marker.length) break;
    out += ch;
    bytes += n;
  }
  return out + marker;
}

export function referenceFor(target: Referenceable): V1ObjectReference {
  if ('metadata' in target && target.metadata !== undefined) {
    const obj = target as KubernetesObject;
    const ref: V1ObjectReference = {
      apiVersion: obj.apiVersion,
      kind: obj.kind,
      name: obj.metadata?.name,
      namespace: obj.metadata?.namespace,
      uid: obj.metadata?.uid,
      resourceVersion: obj.metadata?.resourceVersion,
    };
    return dropUndefined(ref);
  }
  return dropUndefined({ ...(target as V1ObjectReference) });
}

function dropUndefined<T extends object>(obj: T): T {
  for (const key of Object.keys(obj) as Array<keyof T>) if (obj[key] === undefined) delete obj[key];
  return obj;
}

/** client-go's isomorphism key: reportingController, regarding, related, action, reason. */
export function eventKey(
  reportingController: string,
  regarding: V1ObjectReference,
  related: V1ObjectReference | undefined,
  action: string,
  reason: string,
): string {
  const ref = (r: V1ObjectReference | undefined): unknown[] =>
    r === undefined ? [] : [r.apiVersion, r.kind, r.namespace, r.name, r.uid, r.fieldPath];
  return JSON.stringify([reportingController, ref(regarding), ref(related), action, reason]);
}

/** Unique event name: `<regarding name>.<hex nanoseconds>`, as client-go names them. */
export function eventName(regardingName: string, nowMs: number, seq: number): string {
  const suffix = (BigInt(Math.floor(nowMs)) * 1_000_000n + BigInt(seq % 1_000_000)).toString(16);
  return `${regardingName.slice(0, 253 - 1 - suffix.length)}.${suffix}`;
}

// ---- the recorder ----

export interface EventRecorderOptions {
  sink: EventSink;
  /** e.g. `berth.skaphos.io/berth-operator`. */
  reportingController: string;
  /** This replica, e.g. the pod name or leader-election identity; at most 128 characters. */
  reportingInstance: string;
  clock?: Clock;
  logger?: Logger;
  /** A repeat later than this after the previous occurrence starts a new Event. Default 6 min (client-go). */
  seriesWindowMs?: number;
  /**
   * Series tracked for de-duplication (least recently seen dropped first). Default 4096. Series older
   * than `seriesWindowMs` are dropped anyway, at the next event.
   */
  maxTracked?: number;
  /** Events with a write outstanding; beyond this new events are dropped (and logged). Default 1000. */
  maxPendingWrites?: number;
  /** Attempts per write for transient failures (5xx, 429, network). Default 3. */
  attempts?: number;
  /** First retry delay, doubled per attempt. Default 1 s. */
  retryDelayMs?: number;
}

interface Series {
  namespace: string;
  /** Name of the Event object on the server. */
  name: string;
  body: EventsV1Event;
  created: boolean;
  count: number;
  /** The count the server has (0: nothing written yet). */
  written: number;
  lastObserved: number;
  writing: Promise<void> | undefined;
}

export class EventRecorder {
  readonly #o: EventRecorderOptions;
  readonly #clock: Clock;
  readonly #series = new Map<string, Series>();
  readonly #writes = new Set<Promise<void>>();
  #seq = 0;

  constructor(options: EventRecorderOptions) {
    this.#o = options;
    this.#clock = options.clock ?? realClock;
  }

  /**
   * Records an event about `regarding`. Never throws or rejects; the promise settles when this
   * occurrence has been written (or given up on), so callers may ignore it.
   */
  record(regarding: Referenceable, spec: EventSpec): Promise<void> {
    try {
      return this.#record(regarding, spec);
    } catch (err) {
      this.#o.logger?.error({ err: describeError(err), reason: spec?.reason }, 'cannot record event');
      return Promise.resolve();
    }
  }

  /** Shorthands. */
  normal(regarding: Referenceable, reason: string, action: string, note?: string): Promise<void> {
    return this.record(regarding, {
      type: 'Normal',
      reason,
      action,
      ...(note === undefined ? {} : { note }),
    });
  }

  warning(regarding: Referenceable, reason: string, action: string, note?: string): Promise<void> {
    return this.record(regarding, {
      type: 'Warning',
      reason,
      action,
      ...(note === undefined ? {} : { note }),
    });
  }

  /** Waits for every outstanding write (tests, graceful shutdown). */
  async flush(): Promise<void> {
    while (this.#writes.size > 0) await Promise.all([...this.#writes]);
  }

  /** Number of series currently tracked (bounded by maxTracked). */
  get tracked(): number {
    return this.#series.size;
  }

  #record(target: Referenceable, spec: EventSpec): Promise<void> {
    const regarding = referenceFor(target);
    if (!regarding.name) throw new Error('regarding object has no name');
    if (spec.type !== 'Normal' && spec.type !== 'Warning')
      throw new Error(`invalid event type "${String(spec.type)}"`);
    if (!spec.reason || !spec.action) throw new Error('event reason and action are required');
    const related = spec.related === undefined ? undefined : referenceFor(spec.related);
    const reason = spec.reason.slice(0, 128);
    const action = spec.action.slice(0, 128);
    const now = this.#clock.now();
    const key = eventKey(this.#o.reportingController, regarding, related, action, reason);

    const windowMs = this.#o.seriesWindowMs ?? 6 * 60_000;
    // A series whose window has passed can only start a new Event: it is dropped. The map is in order of
    // last occurrence, so the expired ones are at its front. Without this sweep, series of objects that
    // never recur (leases churned under new names) stayed until maxTracked pushed them out, and the
    // recorder's memory grew with every new object for as long as that took (issue 32).
    for (const [oldKey, old] of this.#series) {
      if (now - old.lastObserved <= windowMs) break;
      this.#series.delete(oldKey);
    }
    let series = this.#series.get(key);
    if (series !== undefined) {
      series.count++;
      series.lastObserved = now;
      // Least recently seen first: re-insert to move to the end.
      this.#series.delete(key);
      this.#series.set(key, series);
    } else {
      const namespace = regarding.namespace || 'default';
      const name = eventName(regarding.name, now, this.#seq++);
      const body: EventsV1Event = {
        apiVersion: 'events.k8s.io/v1',
        kind: 'Event',
        metadata: { name, namespace },
        eventTime: new V1MicroTime(now),
        reportingController: this.#o.reportingController,
        reportingInstance: this.#o.reportingInstance.slice(0, 128),
        regarding,
        ...(related === undefined ? {} : { related }),
        reason,
        action,
        type: spec.type,
        ...(spec.note === undefined ? {} : { note: truncateUtf8(spec.note, 1024) }),
      };
      series = {
        namespace,
        name,
        body,
        created: false,
        count: 1,
        written: 0,
        lastObserved: now,
        writing: undefined,
      };
      this.#series.set(key, series);
      const max = this.#o.maxTracked ?? 4096;
      while (this.#series.size > max) {
        const oldest = this.#series.keys().next().value;
        if (oldest === undefined) break;
        this.#series.delete(oldest);
      }
    }
    return this.#schedule(series);
  }

  #schedule(series: Series): Promise<void> {
    // A write in flight loops until the server has the latest count, so it covers this occurrence too.
    if (series.writing !== undefined) return series.writing;
    if (this.#writes.size >= (this.#o.maxPendingWrites ?? 1000)) {
      this.#o.logger?.warn(
        { reason: series.body.reason, regarding: series.body.regarding?.name },
        'too many event writes outstanding; event dropped',
      );
      series.written = series.count;
      return Promise.resolve();
    }
    const write = this.#drain(series)
      .catch((err: unknown) => {
        this.#o.logger?.error({ err: describeError(err) }, 'event write failed');
      })
      .finally(() => {
        series.writing = undefined;
        this.#writes.delete(write);
      });
    series.writing = write;
    this.#writes.add(write);
    return write;
  }

  async #drain(series: Series): Promise<void> {
    while (series.written !== series.count) {
      if (!series.created) {
        const ok = await this.#attempt('create', series, () =>
          this.#o.sink.create(series.namespace, series.body),
        );
        if (ok) {
          series.created = true;
          series.written = 1;
        } else {
          series.written = series.count;
        }
        continue;
      }
      const count = series.count;
      const patch = { series: { count, lastObservedTime: formatMicroTime(series.lastObserved) } };
      try {
        const ok = await this.#attempt('patch', series, () =>
          this.#o.sink.patch(series.namespace, series.name, patch),
        );
        series.written = ok ? count : series.count;
      } catch (err) {
        if (!isNotFound(err)) throw err;
        // The Event expired (1 h TTL) or was deleted: start over with a fresh one, like client-go.
        const now = this.#clock.now();
        series.name = eventName(series.body.regarding?.name ?? 'event', now, this.#seq++);
        series.body = {
          ...series.body,
          metadata: { ...series.body.metadata, name: series.name },
          eventTime: new V1MicroTime(now),
        };
        series.created = false;
        series.count = 1;
        series.written = 0;
      }
    }
  }

  /**
   * Runs one write with retries for transient failures. Resolves true when written, false when given
   * up (logged); rethrows NotFound for patches so the caller can recreate the Event.
   */
  async #attempt(op: 'create' | 'patch', series: Series, write: () => Promise<unknown>): Promise<boolean> {
    const attempts = Math.max(1, this.#o.attempts ?? 3);
    const baseDelay = this.#o.retryDelayMs ?? 1000;
    for (let i = 1; ; i++) {
      try {
        await write();
        return true;
      } catch (err) {
        if (op === 'patch' && isNotFound(err)) throw err;
        // A retried create whose first attempt reached the server: the Event is there.
        if (op === 'create' && i > 1 && isAlreadyExists(err)) return true;
        const transient = isTransient(err);
        const context = {
          op,
          err: describeError(err),
          attempt: i,
          event: `${series.namespace}/${series.name}`,
          reason: series.body.reason,
        };
        if (!transient || i >= attempts) {
          this.#o.logger?.error(context, 'cannot write event; giving up');
          return false;
        }
        this.#o.logger?.debug(context, 'event write failed; retrying');
        await this.#clock.sleep(baseDelay * 2 ** (i - 1));
      }
    }
  }
}

/** Server errors, throttling, timeouts and failures without an HTTP status (network). */
function isTransient(err: unknown): boolean {
  const code = statusCodeOf(err);
  return code === undefined || code === 429 || code >= 500;
}
