// The errors the admission chain raises, worded as kube-apiserver words them
// (k8s.io/apimachinery/pkg/api/errors and k8s.io/apiserver/pkg/admission/plugin/webhook/errors).
import { type GroupVersionResource, type StatusDetails, StatusError } from './types.ts';

/** GroupResource.String(): `pods`, `deployments.apps`. */
export const groupResource = (gvr: GroupVersionResource): string =>
  gvr.group ? `${gvr.resource}.${gvr.group}` : gvr.resource;

/** apierrors.NewInternalError. Kube's cause carries only the message; reason and field stay empty. */
export function internalError(message: string): StatusError {
  return new StatusError(500, 'InternalError', `Internal error occurred: ${message}`, {
    causes: [{ reason: '', field: '', message }],
  });
}

/** apierrors.NewForbidden. */
export function forbiddenError(gvr: GroupVersionResource, name: string, message: string): StatusError {
  const gr = groupResource(gvr);
  const text = name === '' ? `${gr} is forbidden: ${message}` : `${gr} "${name}" is forbidden: ${message}`;
  return new StatusError(403, 'Forbidden', text, { name, group: gvr.group, kind: gvr.resource });
}

/** apierrors.NewNotFound for a core resource, e.g. the namespace a namespaceSelector needs. */
export function notFoundError(resource: string, name: string): StatusError {
  return new StatusError(404, 'NotFound', `${resource} "${name}" not found`, {
    name,
    group: '',
    kind: resource,
  });
}

/** webhookerrors.NewDryRunUnsupportedErr: a plain 400, not subject to failurePolicy. */
export const dryRunUnsupportedError = (webhookName: string): StatusError =>
  new StatusError(400, 'BadRequest', `admission webhook "${webhookName}" does not support dry run`);

/**
 * webhookutil.ErrCallingWebhook: the webhook could not be asked or answered unusably. Only this kind of
 * failure is subject to failurePolicy; denials and errors applying a patch never are.
 */
export class WebhookCallError extends Error {
  readonly webhookName: string;
  readonly reason: string;
  constructor(webhookName: string, reason: string) {
    super(`failed calling webhook "${webhookName}": ${reason}`);
    this.name = 'WebhookCallError';
    this.webhookName = webhookName;
    this.reason = reason;
  }
}

/** The `status` of a webhook's denial (metav1.Status), as far as it can be read. */
export interface WebhookStatus {
  code?: number;
  message?: string;
  reason?: string;
  status?: string;
  details?: StatusDetails;
}

/**
 * webhookerrors.ToStatusErr: a code below 400 (or none) becomes 400, the message names the webhook; the
 * webhook's reason and details are passed through untouched.
 */
export function toStatusErr(webhookName: string, result: WebhookStatus | undefined): StatusError {
  const deniedBy = `admission webhook "${webhookName}" denied the request`;
  const code = result?.code !== undefined && result.code >= 400 ? result.code : 400;
  let message = `${deniedBy} without explanation`;
  if (result?.message) message = `${deniedBy}: ${result.message}`;
  else if (result?.reason) message = `${deniedBy}: ${result.reason}`;
  return new StatusError(code, result?.reason ?? '', message, result?.details);
}

/** utilerrors.NewAggregate(...).Error(): duplicates dropped, several messages in brackets. */
export function aggregateMessage(messages: string[]): string {
  const unique = [...new Set(messages)];
  return unique.length === 1 ? (unique[0] ?? '') : `[${unique.join(', ')}]`;
}
