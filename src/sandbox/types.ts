// Shared shapes of the sandbox API server. Objects are plain JSON: the sandbox stores what clients send,
// exactly as kube-apiserver stores unstructured content, so no typed models are involved here.

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: JsonObject[];
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** A stored Kubernetes object: apiVersion/kind/metadata plus arbitrary content. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

/** One field error of a 422 Invalid Status, shaped like metav1.StatusCause. */
export interface FieldCause {
  /** metav1.CauseType, e.g. FieldValueInvalid, FieldValueRequired, FieldValueNotSupported, FieldValueForbidden. */
  reason: string;
  /** Full message as kube-apiserver renders it, e.g. `Invalid value: "x": must be ...`. */
  message: string;
  /** Field path, e.g. `spec.ttl` or `spec.containers[0].name`. */
  field: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: FieldCause[];
  retryAfterSeconds?: number;
}

/** An error that the server answers as a metav1.Status with the given HTTP code and reason. */
export class StatusError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: StatusDetails | undefined;
  constructor(code: number, reason: string, message: string, details?: StatusDetails) {
    super(message);
    this.name = 'StatusError';
    this.code = code;
    this.reason = reason;
    this.details = details;
  }

  toStatus(): JsonObject {
    const status: JsonObject = {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      code: this.code,
    };
    if (this.details) status.details = this.details as unknown as JsonObject;
    return status;
  }
}

export const badRequest = (message: string): StatusError => new StatusError(400, 'BadRequest', message);

/** Identifies a resource the way admission and RBAC see it. */
export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

/** The authenticated caller, as kube-apiserver's authentication.k8s.io/v1 UserInfo. */
export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

/**
 * The 422 Invalid error kube-apiserver returns for field errors: `Kind.group "name" is invalid: cause`
 * (several causes are listed in brackets, joined by ", ").
 */
export function invalidError(
  gk: { group: string; kind: string },
  name: string,
  causes: FieldCause[],
): StatusError {
  const qualified = gk.group ? `${gk.kind}.${gk.group}` : gk.kind;
  const rendered = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message));
  const summary = rendered.length === 1 ? rendered[0] : `[${rendered.join(', ')}]`;
  return new StatusError(422, 'Invalid', `${qualified} "${name}" is invalid: ${summary}`, {
    name,
    group: gk.group,
    kind: gk.kind,
    causes,
  });
}
