// The guard's flags (aether's compiled-in constants, made configurable with the same defaults) and
// their zod validation. The run command appends `nodeTaintFlags` to its flag table and calls
// `parseNodeTaintConfig(values, { operatorNamespace })` once; a bad value is a one-line UsageError.
import { z } from 'zod';
import type { FlagSpec, FlagValues } from '../cli.ts';
import { UsageError } from '../cli.ts';
import { type LabelSelector, parseLabelSelector } from '../kube/labels.ts';
import { isDnsLabel, isLabelValue, isQualifiedName, optionalNamespaceSchema } from '../kube/names.ts';

export const DEFAULT_TAINT_KEY = 'aether.io/agent-not-ready';
export const DEFAULT_TAINT_VALUE = 'true';
export const DEFAULT_TAINT_EFFECT = 'NoSchedule';
export const DEFAULT_AGENT_SELECTOR = 'app.kubernetes.io/name=aether-agent';
export const DEFAULT_TAINT_GRACE = '30s';
/** Field manager of the taint patch, as in aether (`client.FieldOwner("aether-controller")`). */
export const DEFAULT_FIELD_MANAGER = 'aether-controller';

export type TaintEffect = 'NoSchedule' | 'PreferNoSchedule';

export interface GuardTaint {
  key: string;
  value: string;
  effect: TaintEffect;
}

export interface NodeTaintConfig {
  /** `--node-taint-guard`: when false the run command does not build the guard at all. */
  enabled: boolean;
  taint: GuardTaint;
  /** Namespace of the agent DaemonSet's Pods (the operator namespace unless set). */
  agentNamespace: string;
  agentSelector: LabelSelector;
  graceMs: number;
  fieldManager: string;
}

const env = (name: string): string => `BERTH_${name.toUpperCase().replace(/-/g, '_')}`;

export const nodeTaintFlags: FlagSpec[] = [
  {
    name: 'node-taint-guard',
    kind: 'boolean',
    default: true,
    help: 'Run the node taint guard (leader only): re-arm the agent-not-ready taint on nodes whose agent pod exists but has not been Ready for --taint-grace; it never removes the taint',
    env: env('node-taint-guard'),
  },
  {
    name: 'taint-key',
    kind: 'string',
    default: DEFAULT_TAINT_KEY,
    help: 'Key of the startup taint; a taint with this key and any value or effect counts as present',
    env: env('taint-key'),
  },
  {
    name: 'taint-value',
    kind: 'string',
    default: DEFAULT_TAINT_VALUE,
    help: 'Value of the taint the guard adds',
    env: env('taint-value'),
  },
  {
    name: 'taint-effect',
    kind: 'string',
    default: DEFAULT_TAINT_EFFECT,
    help: 'Effect of the taint the guard adds: NoSchedule or PreferNoSchedule (NoExecute is refused: it would evict workloads on every agent roll)',
    env: env('taint-effect'),
  },
  {
    name: 'agent-namespace',
    kind: 'string',
    default: '',
    help: 'Namespace of the agent DaemonSet pods; when empty, the operator namespace',
    env: env('agent-namespace'),
  },
  {
    name: 'agent-selector',
    kind: 'string',
    default: DEFAULT_AGENT_SELECTOR,
    help: 'Label selector of the agent pods',
    env: env('agent-selector'),
  },
  {
    name: 'taint-grace',
    kind: 'duration',
    default: DEFAULT_TAINT_GRACE,
    help: 'How long a node may have agent pods but none Ready before the taint is re-armed, measured from the pods becoming not Ready',
    env: env('taint-grace'),
  },
];

export const NO_EXECUTE_REFUSED =
  'NoExecute is refused: a NoExecute taint evicts every pod that does not tolerate it, so each agent roll or restart would evict the workloads on the node (aether rejected it in proposal 033); use NoSchedule';

const schema = z.object({
  'node-taint-guard': z.boolean(),
  'taint-key': z.string().refine(isQualifiedName, {
    message: 'must be a qualified name ([DNS-subdomain/]name, name at most 63 characters)',
  }),
  'taint-value': z.string().refine(isLabelValue, {
    message: 'must be empty or at most 63 letters, digits, "-", "_" or "." starting and ending alphanumeric',
  }),
  'taint-effect': z.string().superRefine((value, ctx) => {
    if (value === 'NoExecute') ctx.addIssue({ code: 'custom', message: NO_EXECUTE_REFUSED });
    else if (value !== 'NoSchedule' && value !== 'PreferNoSchedule')
      ctx.addIssue({ code: 'custom', message: `must be NoSchedule or PreferNoSchedule, not "${value}"` });
  }),
  'agent-namespace': optionalNamespaceSchema,
  'agent-selector': z.string().transform((text, ctx): LabelSelector => {
    if (text.trim() === '') {
      ctx.addIssue({ code: 'custom', message: 'must not be empty (every pod in the namespace would count)' });
      return z.NEVER;
    }
    try {
      return parseLabelSelector(text);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `invalid label selector: ${(err as Error).message}` });
      return z.NEVER;
    }
  }),
  'taint-grace': z.number().positive('must be greater than zero'),
});

export interface NodeTaintDefaults {
  /** The resolved operator namespace: the agent namespace when --agent-namespace is empty. */
  operatorNamespace: string;
  fieldManager?: string;
}

/** Parsed flag values -> NodeTaintConfig, or a one-line UsageError naming the flag. */
export function parseNodeTaintConfig(values: FlagValues, defaults: NodeTaintDefaults): NodeTaintConfig {
  const result = schema.safeParse(values);
  if (!result.success) {
    const first = result.error.issues[0];
    const flag = first?.path[0];
    const where = typeof flag === 'string' ? `--${flag}` : 'node taint guard';
    throw new UsageError(`${where}: ${first?.message ?? 'invalid value'}`);
  }
  const f = result.data;
  const agentNamespace = f['agent-namespace'] || defaults.operatorNamespace;
  if (f['node-taint-guard'] && !isDnsLabel(agentNamespace))
    throw new UsageError(
      `--agent-namespace: "${agentNamespace}" is not a namespace name (it defaults to the operator namespace)`,
    );
  return {
    enabled: f['node-taint-guard'],
    taint: { key: f['taint-key'], value: f['taint-value'], effect: f['taint-effect'] as TaintEffect },
    agentNamespace,
    agentSelector: f['agent-selector'],
    graceMs: f['taint-grace'],
    fieldManager: defaults.fieldManager ?? DEFAULT_FIELD_MANAGER,
  };
}
