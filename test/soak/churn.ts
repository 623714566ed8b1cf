// The churn of a soak run, driven by a seeded Random: managed workloads (a BerthLease and its Deployment,
// the same in both clusters, as the spec prescribes) created, rescaled and deleted; lease-only leases
// created and deleted; Nodes and node-agent Pods (the taint guard's inputs) created, flipped between
// Ready and not Ready, and deleted. No kubelet serves these Nodes (KWOK leaves Nodes without its label
// alone): the churn writes the agents' Ready condition itself, as a kubelet would. Everything is done as
// cluster admin, which the API faults do not target; a failed action (e.g. admission denying under
// faults, fail closed) is counted, not fatal.
import type { BerthLeaseSpec } from '../../src/berth/api.ts';
import { mergePatch, strategicPatch } from '../helpers/api.ts';
import { deploymentLease, NS } from '../integration/managed/harness.ts';
import type { Random } from './random.ts';
import { LEASE_TIMES } from './timing.ts';
import { AGENT_LABEL, AGENT_NS, AGENT_VALUE, type Site } from './world.ts';

export interface ChurnLimits {
  workloads: number;
  leaseOnly: number;
  nodes: number;
  agents: number;
}

export type ActionCounts = Record<string, { ok: number; failed: number; lastError?: string }>;

interface Agent {
  site: Site;
  name: string;
}

export class Churn {
  readonly counts: ActionCounts = {};
  /** Live managed workloads: name -> replicas while held. */
  readonly workloads = new Map<string, number>();
  readonly #leaseOnly = new Set<string>();
  readonly #nodes: Array<{ site: Site; name: string }> = [];
  readonly #agents: Agent[] = [];
  readonly #sites: Site[];
  readonly #random: Random;
  readonly #limits: ChurnLimits;
  #seq = 0;

  constructor(sites: Site[], random: Random, limits: ChurnLimits) {
    this.#sites = sites;
    this.#random = random;
    this.#limits = limits;
  }

  /** Live lease-only leases. */
  leaseOnlyNames(): string[] {
    return [...this.#leaseOnly];
  }

  /** One random action. */
  async step(): Promise<void> {
    const r = this.#random;
    const actions: Array<[string, () => Promise<void>]> = [];
    // Weighted up: under API faults admission fails closed and many creates are refused.
    if (this.workloads.size < this.#limits.workloads)
      for (let i = 0; i < 3; i++) actions.push(['workload-create', () => this.#createWorkload()]);
    if (this.workloads.size > 0) {
      actions.push(['workload-scale', () => this.#scaleWorkload()]);
      if (this.workloads.size > 1 || r.chance(0.3))
        actions.push(['workload-delete', () => this.#deleteWorkload()]);
    }
    if (this.#leaseOnly.size < this.#limits.leaseOnly)
      actions.push(['lease-create', () => this.#createLeaseOnly()]);
    if (this.#leaseOnly.size > 0) actions.push(['lease-delete', () => this.#deleteLeaseOnly()]);
    if (this.#nodes.length < this.#limits.nodes) actions.push(['node-create', () => this.#createNode()]);
    if (this.#nodes.length > 0) {
      actions.push(['node-delete', () => this.#deleteNode()]);
      if (this.#agents.length < this.#limits.agents)
        actions.push(['agent-create', () => this.#createAgent()]);
    }
    if (this.#agents.length > 0) {
      actions.push(['agent-readiness', () => this.#flipAgent()]);
      actions.push(['agent-delete', () => this.#deleteAgent()]);
    }
    const [name, run] = r.pick(actions);
    const count = this.counts[name] ?? { ok: 0, failed: 0 };
    this.counts[name] = count;
    try {
      await run();
      count.ok++;
    } catch (err) {
      count.failed++;
      count.lastError = errorText(err);
    }
  }

  // ---- managed workloads ----

  async #createWorkload(): Promise<void> {
    const name = `w-${++this.#seq}`;
    const replicas = this.#random.int(1, 2);
    this.workloads.set(name, replicas);
    const spec: BerthLeaseSpec = deploymentLease(name, replicas, LEASE_TIMES);
    // The lease before its target, so that admission records the target (docs/behaviour.md §4.5).
    try {
      await Promise.all(this.#sites.map((s) => s.cluster.createLease(name, spec)));
      await Promise.all(this.#sites.map((s) => s.cluster.createDeployment(name, 0)));
    } catch (err) {
      // Admission fails closed under faults: a workload that was not created everywhere is removed.
      await this.#removeWorkload(name).catch(() => {});
      throw err;
    }
  }

  async #scaleWorkload(): Promise<void> {
    const name = this.#random.pick([...this.workloads.keys()]);
    const replicas = this.#random.int(1, 3);
    this.workloads.set(name, replicas);
    const body = { spec: { acquireAction: { scale: { replicas } } } };
    await Promise.all(
      this.#sites.map((s) =>
        s.cluster.custom.patchNamespacedCustomObject({ ...s.cluster.ref(), name, body }, mergePatch),
      ),
    );
  }

  async #deleteWorkload(): Promise<void> {
    await this.#removeWorkload(this.#random.pick([...this.workloads.keys()]));
  }

  async #removeWorkload(name: string): Promise<void> {
    this.workloads.delete(name);
    await Promise.all(
      this.#sites.flatMap((s) => [
        s.cluster.deleteLease(name).catch(ignoreNotFound),
        s.cluster.apps.deleteNamespacedDeployment({ namespace: NS, name }).catch(ignoreNotFound),
      ]),
    );
  }

  // ---- lease-only leases ----

  async #createLeaseOnly(): Promise<void> {
    const name = `lo-${++this.#seq}`;
    this.#leaseOnly.add(name);
    const spec: BerthLeaseSpec = {
      leaseName: name,
      holderIdentity: 'unused-with-cluster-id',
      semantics: 'at-most-once',
      ...LEASE_TIMES,
    };
    await Promise.all(this.#sites.map((s) => s.cluster.createLease(name, spec)));
  }

  async #deleteLeaseOnly(): Promise<void> {
    const name = this.#random.pick([...this.#leaseOnly]);
    this.#leaseOnly.delete(name);
    await Promise.all(this.#sites.map((s) => s.cluster.deleteLease(name).catch(ignoreNotFound)));
  }

  // ---- nodes and agent Pods (the taint guard) ----

  async #createNode(): Promise<void> {
    const site = this.#random.pick(this.#sites);
    const name = `soak-node-${++this.#seq}`;
    this.#nodes.push({ site, name });
    await site.cluster.core.createNode({ body: { metadata: { name } } });
  }

  async #deleteNode(): Promise<void> {
    const node = this.#nodes.splice(this.#random.int(0, this.#nodes.length - 1), 1)[0]!;
    await node.site.cluster.core.deleteNode({ name: node.name }).catch(ignoreNotFound);
  }

  async #createAgent(): Promise<void> {
    // Agents only on soak nodes; KWOK's Nodes run the workloads.
    const node = this.#random.pick(this.#nodes);
    const name = `agent-${++this.#seq}`;
    this.#agents.push({ site: node.site, name });
    await node.site.cluster.core.createNamespacedPod({
      namespace: AGENT_NS,
      body: {
        metadata: { name, labels: { [AGENT_LABEL]: AGENT_VALUE } },
        spec: { nodeName: node.name, containers: [{ name: 'agent', image: 'aether/agent:1' }] },
      },
    });
  }

  async #flipAgent(): Promise<void> {
    const agent = this.#random.pick(this.#agents);
    const status = this.#random.chance(0.5) ? 'True' : 'False';
    await agent.site.cluster.core.patchNamespacedPodStatus(
      {
        namespace: AGENT_NS,
        name: agent.name,
        body: { status: { conditions: [{ type: 'Ready', status, lastTransitionTime: new Date() }] } },
      },
      strategicPatch,
    );
  }

  async #deleteAgent(): Promise<void> {
    const agent = this.#agents.splice(this.#random.int(0, this.#agents.length - 1), 1)[0]!;
    // At once, as a kubelet would finish it: no kubelet confirms the deletion of a Pod on these Nodes.
    await agent.site.cluster.core
      .deleteNamespacedPod({ namespace: AGENT_NS, name: agent.name, gracePeriodSeconds: 0 })
      .catch(ignoreNotFound);
  }
}

function errorText(err: unknown): string {
  const body = (err as { body?: unknown }).body;
  if (typeof body === 'string') {
    try {
      return String((JSON.parse(body) as { message?: unknown }).message ?? body).slice(0, 300);
    } catch {
      return body.slice(0, 300);
    }
  }
  return (err instanceof Error ? err.message : String(err)).slice(0, 300);
}

function ignoreNotFound(err: unknown): void {
  if ((err as { code?: number }).code !== 404) throw err;
}
