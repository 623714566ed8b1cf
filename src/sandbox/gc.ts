// The controllers kube-controller-manager runs that the API semantics depend on: the garbage collector
// (background, foreground and orphan propagation through ownerReferences) and the namespace lifecycle
// controller (a deleted namespace empties itself, then disappears). They act through ObjectService like
// any client, asynchronously, and retry until the cluster converges.
import type { ObjectService, RequestContext } from './objects.ts';
import type { Registry, ResourceType } from './registry.ts';
import { type Change, objectKey, type Store } from './store.ts';
import type { KubeObject } from './types.ts';

interface Ref {
  typeKey: string;
  namespace: string | undefined;
  name: string;
}

const GC_USER = {
  username: 'system:serviceaccount:kube-system:generic-garbage-collector',
  groups: ['system:serviceaccounts', 'system:authenticated'],
};
const NS_USER = {
  username: 'system:serviceaccount:kube-system:namespace-controller',
  groups: ['system:serviceaccounts', 'system:authenticated'],
};
const RETRY_MS = 250;

export class Controllers {
  private readonly store: Store;
  private readonly registry: Registry;
  private readonly objects: ObjectService;
  /** uid -> where the object lives. */
  private readonly byUid = new Map<string, Ref>();
  /** owner uid -> dependents (by `typeKey|ns/name`). */
  private readonly dependents = new Map<string, Map<string, Ref>>();
  private readonly pending = new Set<string>();
  private scheduled = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private stopped = false;
  private readonly unsubscribe: () => void;

  constructor(store: Store, registry: Registry, objects: ObjectService) {
    this.store = store;
    this.registry = registry;
    this.objects = objects;
    this.unsubscribe = store.subscribe((change) => this.observe(change));
  }

  stop(): void {
    this.stopped = true;
    this.unsubscribe();
    for (const t of this.timers) clearTimeout(t);
  }

  private observe(change: Change): void {
    const obj = change.object;
    const uid = obj.metadata.uid;
    const ref: Ref = {
      typeKey: change.typeKey,
      namespace: obj.metadata.namespace,
      name: obj.metadata.name ?? '',
    };
    const depKey = `${change.typeKey}|${objectKey(ref.namespace, ref.name)}`;
    for (const owner of change.previous?.metadata.ownerReferences ?? [])
      this.dependents.get(owner.uid)?.delete(depKey);
    if (change.type === 'DELETED') {
      if (uid) {
        this.byUid.delete(uid);
        // Dependents of a vanished owner are checked by the collector.
        for (const dep of this.dependents.get(uid)?.values() ?? [])
          this.enqueue(`dep:${dep.typeKey}|${objectKey(dep.namespace, dep.name)}`);
        this.dependents.delete(uid);
      }
    } else {
      if (uid) this.byUid.set(uid, ref);
      for (const owner of obj.metadata.ownerReferences ?? []) {
        let set = this.dependents.get(owner.uid);
        if (!set) {
          set = new Map();
          this.dependents.set(owner.uid, set);
        }
        set.set(depKey, ref);
      }
      if ((obj.metadata.ownerReferences ?? []).length > 0 && change.type === 'ADDED')
        this.enqueue(`dep:${depKey}`);
      if (obj.metadata.deletionTimestamp) this.enqueue(`owner:${depKey}`);
    }
    // A dependent of a terminating owner (or a namespace) changed or vanished: the owner may now finish.
    for (const owner of obj.metadata.ownerReferences ?? []) {
      const ownerRef = this.byUid.get(owner.uid);
      if (ownerRef) this.enqueue(`owner:${ownerRef.typeKey}|${objectKey(ownerRef.namespace, ownerRef.name)}`);
    }
    if (obj.metadata.namespace) {
      const ns = this.store.get('/namespaces', undefined, obj.metadata.namespace);
      if (ns?.metadata.deletionTimestamp)
        this.enqueue(`owner:/namespaces|${objectKey(undefined, obj.metadata.namespace)}`);
    }
  }

  /** Deletion requested through the API: start propagation (called by ObjectService). */
  onDeleteRequested(type: ResourceType, object: KubeObject): void {
    const key = `${type.group}/${type.resource}|${objectKey(object.metadata.namespace, object.metadata.name ?? '')}`;
    this.enqueue(`owner:${key}`);
  }

  private enqueue(item: string): void {
    if (this.stopped) return;
    this.pending.add(item);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => void this.drain());
    }
  }

  private retry(item: string): void {
    if (this.stopped) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      this.enqueue(item);
    }, RETRY_MS);
    t.unref();
    this.timers.add(t);
  }

  private async drain(): Promise<void> {
    this.scheduled = false;
    const items = [...this.pending];
    this.pending.clear();
    for (const item of items) {
      if (this.stopped) return;
      try {
        const done = item.startsWith('dep:')
          ? await this.collectDependent(item.slice(4))
          : await this.finishOwner(item.slice(6));
        if (!done) this.retry(item);
      } catch {
        this.retry(item);
      }
    }
  }

  private lookup(key: string): { type: ResourceType; object: KubeObject } | undefined {
    const [tk, ok] = key.split('|') as [string, string];
    const slash = tk.indexOf('/');
    const type = this.registry.byGroupResource(tk.slice(0, slash), tk.slice(slash + 1));
    if (!type) return undefined;
    const nsEnd = ok.indexOf('/');
    const object = this.store.get(tk, ok.slice(0, nsEnd) || undefined, ok.slice(nsEnd + 1));
    return object ? { type, object } : undefined;
  }

  private ctx(user: typeof GC_USER): RequestContext {
    return { user, dryRun: false, fieldManager: 'kube-controller-manager', warnings: [] };
  }

  /** A dependent whose owners are all gone is deleted; dangling references beside live owners are removed. */
  private async collectDependent(key: string): Promise<boolean> {
    const found = this.lookup(key);
    if (!found) return true;
    const { type, object } = found;
    const refs = object.metadata.ownerReferences ?? [];
    if (refs.length === 0) return true;
    const live = refs.filter((r) => this.byUid.has(r.uid));
    if (live.length === refs.length) return true;
    const ns = object.metadata.namespace ?? '';
    const name = object.metadata.name ?? '';
    if (live.length === 0) {
      if (object.metadata.deletionTimestamp) return true;
      await this.objects.delete(
        type,
        ns,
        name,
        { propagationPolicy: 'Background', preconditions: { uid: object.metadata.uid } },
        this.ctx(GC_USER),
      );
      return true;
    }
    const patch = JSON.stringify({ metadata: { ownerReferences: live, uid: object.metadata.uid } });
    await this.objects.patch(type, ns, name, 'merge', patch, '', this.ctx(GC_USER), false);
    return true;
  }

  /** A terminating object: foreground/orphan finalizers and namespaces are driven to completion here. */
  private async finishOwner(key: string): Promise<boolean> {
    const found = this.lookup(key);
    if (!found?.object.metadata.deletionTimestamp) return true;
    const { type, object } = found;
    if (type.group === '' && type.resource === 'namespaces') return this.finishNamespace(object);
    if (type.group === 'apiextensions.k8s.io' && type.resource === 'customresourcedefinitions')
      return this.finishCrd(type, object);
    const finalizers = object.metadata.finalizers ?? [];
    const uid = object.metadata.uid ?? '';
    const deps = [...(this.dependents.get(uid)?.values() ?? [])];
    let finished: string | undefined;
    if (finalizers.includes('orphan')) {
      for (const dep of deps) {
        const d = this.lookup(`${dep.typeKey}|${objectKey(dep.namespace, dep.name)}`);
        if (!d) continue;
        const remaining = (d.object.metadata.ownerReferences ?? []).filter((r) => r.uid !== uid);
        const patch = JSON.stringify({ metadata: { ownerReferences: remaining } });
        await this.objects.patch(
          d.type,
          d.object.metadata.namespace ?? '',
          d.object.metadata.name ?? '',
          'merge',
          patch,
          '',
          this.ctx(GC_USER),
          false,
        );
      }
      finished = 'orphan';
    } else if (finalizers.includes('foregroundDeletion')) {
      let blocking = 0;
      for (const dep of deps) {
        const d = this.lookup(`${dep.typeKey}|${objectKey(dep.namespace, dep.name)}`);
        if (!d) continue;
        blocking++;
        if (!d.object.metadata.deletionTimestamp) {
          await this.objects.delete(
            d.type,
            d.object.metadata.namespace ?? '',
            d.object.metadata.name ?? '',
            { propagationPolicy: 'Foreground' },
            this.ctx(GC_USER),
          );
        }
      }
      if (blocking > 0) return true; // dependents' changes re-enqueue this owner
      finished = 'foregroundDeletion';
    }
    if (!finished) return true;
    const current = this.lookup(key);
    if (!current) return true;
    const patch = JSON.stringify({
      metadata: {
        finalizers: (current.object.metadata.finalizers ?? []).filter((f) => f !== finished),
        resourceVersion: current.object.metadata.resourceVersion,
      },
    });
    await this.objects.patch(
      type,
      object.metadata.namespace ?? '',
      object.metadata.name ?? '',
      'merge',
      patch,
      '',
      this.ctx(GC_USER),
      false,
    );
    return true;
  }

  private async finishNamespace(ns: KubeObject): Promise<boolean> {
    const name = ns.metadata.name ?? '';
    let remaining = 0;
    for (const type of this.registry.all()) {
      if (!type.namespaced) continue;
      for (const obj of this.store.list(`${type.group}/${type.resource}`, name)) {
        remaining++;
        if (obj.metadata.deletionTimestamp) continue;
        await this.objects.delete(
          type,
          name,
          obj.metadata.name ?? '',
          { propagationPolicy: 'Background', gracePeriodSeconds: 0 },
          this.ctx(NS_USER),
        );
      }
    }
    if (remaining > 0) return this.countIn(name) === 0 ? this.finishNamespace(ns) : true;
    const nsType = this.registry.get('', 'v1', 'namespaces')!;
    const current = this.store.get('/namespaces', undefined, name);
    if (current?.metadata.deletionTimestamp && (current.metadata.finalizers ?? []).length === 0)
      this.objects.removeNow(nsType, current);
    return true;
  }

  /** customresourcecleanup: delete every custom resource of the CRD, then let the CRD go. */
  private async finishCrd(crdType: ResourceType, crd: KubeObject): Promise<boolean> {
    const spec = (crd.spec ?? {}) as { group?: string; names?: { plural?: string } };
    const type = this.registry.byGroupResource(spec.group ?? '', spec.names?.plural ?? '');
    const items = type ? this.store.list(`${type.group}/${type.resource}`) : [];
    for (const obj of items) {
      if (obj.metadata.deletionTimestamp || !type) continue;
      await this.objects.delete(
        type,
        obj.metadata.namespace ?? '',
        obj.metadata.name ?? '',
        { propagationPolicy: 'Background' },
        this.ctx(GC_USER),
      );
    }
    if (items.length > 0) return false; // retried until every custom resource is gone
    const finalizers = (crd.metadata.finalizers ?? []).filter(
      (f) => f !== 'customresourcecleanup.apiextensions.k8s.io',
    );
    if (finalizers.length === (crd.metadata.finalizers ?? []).length) return true;
    const patch = JSON.stringify({ metadata: { finalizers, resourceVersion: crd.metadata.resourceVersion } });
    await this.objects.patch(
      crdType,
      '',
      crd.metadata.name ?? '',
      'merge',
      patch,
      '',
      this.ctx(GC_USER),
      false,
    );
    return true;
  }

  private countIn(namespace: string): number {
    let n = 0;
    for (const type of this.registry.all())
      if (type.namespaced) n += this.store.list(`${type.group}/${type.resource}`, namespace).length;
    return n;
  }
}
