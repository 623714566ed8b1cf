// A controller from its sources, in the spirit of controller-runtime's builder (docs/architecture.md,
// "Controllers from the builder"):
//
//   new ControllerBuilder('node-taint-guard')
//     .for(nodes, { predicate })                     // the reconciled kind: events enqueue the object's key
//     .watches(agentPods, { map, predicate })        // another kind: events enqueue the mapped keys
//     .withEventFilter(predicate)                    // applies to every source, before its own predicate
//     .withOptions({ reconcileTimeoutMs, ... })
//     .withHandOver(fn)                              // work for when leading ends for good (berthlease)
//     .complete(reconciler)                          // -> the Controller and its Manager runnables
//
// Only what the domains use is here: no `owns` (no controller here reconciles an owner from its children),
// no per-build cache (the domains build their informers: selectors, transforms, indexers are theirs).
// A bad build is refused at once with a one-line error.
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  Controller,
  type ControllerOptions,
  type MapFunc,
  type Predicate,
  type Reconciler,
} from './controller.ts';
import { type Cache, ControllerRunnables, type ControllerRunnablesOptions } from './controller-runnables.ts';

/** Options of the built Controller (see ControllerOptions). */
export type BuilderOptions = Pick<
  ControllerOptions,
  'maxConcurrentReconciles' | 'reconcileTimeoutMs' | 'rateLimiter' | 'clock' | 'registry' | 'logger'
>;

/** What the controller runs: reconcile; reset, if any, once the controller stopped (leadership ended). */
export interface BuilderReconciler {
  reconcile: Reconciler;
  reset?(): void;
}

/** The built controller and, as the ControllerRunnables it is, what the Manager runs. */
export class BuiltController extends ControllerRunnables {
  readonly controller: Controller;

  constructor(
    controller: Controller,
    caches: readonly Cache[],
    hooks: Pick<ControllerRunnablesOptions, 'onStopped' | 'handOver'>,
  ) {
    super({ name: controller.name, caches, controllers: [controller], ...hooks });
    this.controller = controller;
  }
}

interface Watch {
  source: Cache<KubernetesObject>;
  map: MapFunc<KubernetesObject> | undefined;
  predicate: Predicate<KubernetesObject> | undefined;
}

export class ControllerBuilder {
  readonly #name: string;
  #for: Watch | undefined;
  readonly #watches: Watch[] = [];
  readonly #filters: Predicate<KubernetesObject>[] = [];
  #options: BuilderOptions = {};
  #handOver: ((grace?: AbortSignal) => Promise<void>) | undefined;
  #completed = false;

  /** `name`: the controller's (metrics label `controller=`, log field, queue) and its leader runnable's. */
  constructor(name: string) {
    if (name === '') throw new Error('controller builder: a name is required');
    this.#name = name;
  }

  /** The kind this controller reconciles: its events enqueue the object's own `namespace/name`. */
  for<T extends KubernetesObject>(source: Cache<T>, options: { predicate?: Predicate<T> } = {}): this {
    if (this.#for !== undefined)
      throw new Error(
        `controller ${this.#name}: for() called twice (${this.#for.source.name}, ${source.name})`,
      );
    this.#for = this.#watch(source, undefined, options.predicate);
    return this;
  }

  /** Another kind whose events enqueue the keys `map` returns (none: nothing enqueued). */
  watches<T extends KubernetesObject>(
    source: Cache<T>,
    options: { map: MapFunc<T>; predicate?: Predicate<T> },
  ): this {
    this.#watches.push(this.#watch(source, options.map, options.predicate));
    return this;
  }

  /** A predicate every event of every source must pass (before the source's own). */
  withEventFilter<T extends KubernetesObject = KubernetesObject>(predicate: Predicate<T>): this {
    this.#filters.push(predicate as Predicate<KubernetesObject>);
    return this;
  }

  withOptions(options: BuilderOptions): this {
    this.#options = { ...this.#options, ...options };
    return this;
  }

  /** Work for when leading ends for good and no successor took over (Runnable.handOver). */
  withHandOver(handOver: (grace?: AbortSignal) => Promise<void>): this {
    this.#handOver = handOver;
    return this;
  }

  /** Builds the Controller with its watches; registers nothing until the runnables start. */
  complete(reconciler: BuilderReconciler): BuiltController {
    const primary = this.#for;
    if (primary === undefined) throw new Error(`controller ${this.#name}: for() is required`);
    // A second Controller of one name on the same caches would reconcile every event twice.
    if (this.#completed) throw new Error(`controller ${this.#name}: complete() called twice`);
    this.#completed = true;
    const watches = [primary, ...this.#watches];
    const controller = new Controller({
      name: this.#name,
      reconcile: reconciler.reconcile,
      ...this.#options,
    });
    for (const w of watches) {
      const predicate = this.#predicate(w.predicate);
      controller.watches(w.source, {
        ...(w.map === undefined ? {} : { map: w.map }),
        ...(predicate === undefined ? {} : { predicate }),
      });
    }
    return new BuiltController(
      controller,
      watches.map((w) => w.source),
      {
        ...(reconciler.reset === undefined ? {} : { onStopped: () => reconciler.reset?.() }),
        ...(this.#handOver === undefined ? {} : { handOver: this.#handOver }),
      },
    );
  }

  #watch<T extends KubernetesObject>(
    source: Cache<T>,
    map: MapFunc<T> | undefined,
    predicate: Predicate<T> | undefined,
  ): Watch {
    const all = [...(this.#for === undefined ? [] : [this.#for]), ...this.#watches];
    // A second watch of one cache would enqueue every event twice, through two mappings.
    if (all.some((w) => w.source === (source as unknown as Cache<KubernetesObject>)))
      throw new Error(`controller ${this.#name}: source ${source.name} is watched twice`);
    return {
      source: source as unknown as Cache<KubernetesObject>,
      map: map as MapFunc<KubernetesObject> | undefined,
      predicate: predicate as Predicate<KubernetesObject> | undefined,
    };
  }

  /** The event filters, then the source's own predicate: all must pass (controller-runtime's order). */
  #predicate(own: Predicate<KubernetesObject> | undefined): Predicate<KubernetesObject> | undefined {
    const all = [...this.#filters, ...(own === undefined ? [] : [own])];
    if (all.length === 0) return undefined;
    return (obj, old) => all.every((p) => p(obj, old));
  }
}
