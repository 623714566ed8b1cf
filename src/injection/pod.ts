// The parts of a Pod that injection reads, checked leniently from a review's raw object: every field it
// touches must have the right type (else a well-formed 400 denial), everything else passes through
// untouched. Pure.
import { z } from 'zod';

const stringMap = z.record(z.string(), z.string()).nullish();

const volumeMount = z.looseObject({
  name: z.string(),
  mountPath: z.string(),
  readOnly: z.boolean().nullish(),
  subPath: z.string().nullish(),
  subPathExpr: z.string().nullish(),
});
export type VolumeMount = z.output<typeof volumeMount>;

const container = z.looseObject({
  name: z.string(),
  volumeMounts: z.array(volumeMount).nullish(),
  ports: z.array(z.looseObject({ containerPort: z.number() })).nullish(),
  livenessProbe: z.unknown().optional(),
  startupProbe: z.unknown().optional(),
  restartPolicy: z.string().nullish(),
  restartPolicyRules: z.unknown().optional(),
  env: z.array(z.looseObject({ name: z.string(), value: z.string().nullish() })).nullish(),
});
export type Container = z.output<typeof container>;

const volume = z.looseObject({ name: z.string(), emptyDir: z.unknown().optional() });

export const podSchema = z.looseObject({
  metadata: z
    .looseObject({
      name: z.string().nullish(),
      namespace: z.string().nullish(),
      labels: stringMap,
      annotations: stringMap,
      ownerReferences: z
        .array(z.looseObject({ kind: z.string(), name: z.string(), controller: z.boolean().nullish() }))
        .nullish(),
    })
    .nullish(),
  spec: z.looseObject({
    containers: z.array(container),
    initContainers: z.array(container).nullish(),
    ephemeralContainers: z.array(container).nullish(),
    volumes: z.array(volume).nullish(),
    shareProcessNamespace: z.boolean().nullish(),
    hostNetwork: z.boolean().nullish(),
  }),
});
export type Pod = z.output<typeof podSchema>;

export type ParsedPod = { ok: true; pod: Pod } | { ok: false; problem: string };

/** The Pod of a review, or what is wrong with it (one line, without echoing values). */
export function parsePod(object: unknown): ParsedPod {
  const parsed = podSchema.safeParse(object);
  if (parsed.success) return { ok: true, pod: parsed.data };
  const issue = parsed.error.issues[0];
  const where = issue === undefined || issue.path.length === 0 ? '(root)' : issue.path.join('.');
  return { ok: false, problem: `${where}: ${issue?.message ?? 'invalid'}` };
}

/** The controller owner (kind and name), which defaults the startup-gate holder. */
export function controllerOwner(pod: Pod): { kind: string; name: string } | undefined {
  const owner = (pod.metadata?.ownerReferences ?? []).find((o) => o.controller === true);
  return owner === undefined ? undefined : { kind: owner.kind, name: owner.name };
}
