// AdmissionReview on the wire (admission.k8s.io/v1; v1beta1 has the same shape and is answered in kind):
// the zod schema of what kube-apiserver sends, the decisions handlers return, and the response builders
// that turn a decision into an AdmissionReview the API server accepts (VerifyAdmissionResponse: same
// apiVersion and kind, the request's uid, patchType exactly when there is a patch, code >= 400 on denial).
import { z } from 'zod';
import type { JsonPatchOp } from '../src/kube/client.ts';

export const ADMISSION_V1 = 'admission.k8s.io/v1';
export const ADMISSION_V1BETA1 = 'admission.k8s.io/v1beta1';
export const ADMISSION_API_VERSIONS = [ADMISSION_V1, ADMISSION_V1BETA1] as const;
export type AdmissionApiVersion = (typeof ADMISSION_API_VERSIONS)[number];

/** Longest uid we echo. kube-apiserver sends a UUID (36 characters). */
export const MAX_UID_LENGTH = 256;

const PRINTABLE_UID = /^[\x21-\x7e]+$/;
const uidSchema = z
  .string()
  .min(1)
  .max(MAX_UID_LENGTH)
  .regex(PRINTABLE_UID, 'must be printable ASCII without spaces');

const gvk = z.object({ group: z.string(), version: z.string(), kind: z.string() });
const gvr = z.object({ group: z.string(), version: z.string(), resource: z.string() });

const userInfo = z.looseObject({
  username: z.string().optional(),
  uid: z.string().optional(),
  groups: z.array(z.string()).nullish(),
  extra: z.record(z.string(), z.array(z.string())).nullish(),
});

const jsonObject = z.record(z.string(), z.unknown());

export const OPERATIONS = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'] as const;
export type Operation = (typeof OPERATIONS)[number];

export const admissionRequestSchema = z.looseObject({
  uid: uidSchema,
  kind: gvk,
  resource: gvr,
  subResource: z.string().optional(),
  requestKind: gvk.nullish(),
  requestResource: gvr.nullish(),
  requestSubResource: z.string().optional(),
  name: z.string().optional(),
  namespace: z.string().optional(),
  operation: z.enum(OPERATIONS),
  userInfo,
  object: jsonObject.nullish(),
  oldObject: jsonObject.nullish(),
  dryRun: z.boolean().nullish(),
  options: jsonObject.nullish(),
});
export type AdmissionRequest = z.infer<typeof admissionRequestSchema>;

export const admissionReviewSchema = z.object({
  apiVersion: z.enum(ADMISSION_API_VERSIONS),
  kind: z.literal('AdmissionReview'),
  request: admissionRequestSchema,
});
export type AdmissionReview = z.infer<typeof admissionReviewSchema>;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const isUid = (v: unknown): v is string =>
  typeof v === 'string' && v.length >= 1 && v.length <= MAX_UID_LENGTH && PRINTABLE_UID.test(v);

/**
 * The uid to echo, read leniently before the full validation so that a review that is otherwise malformed
 * still gets a well-formed denial. Undefined when there is no usable uid (the server then answers 400).
 */
export function usableUid(body: unknown): string | undefined {
  if (!isRecord(body) || !isRecord(body.request)) return undefined;
  const uid = body.request.uid;
  return isUid(uid) ? uid : undefined;
}

/**
 * The first key of parsed JSON that would rewrite a prototype if it were ever assigned rather than defined
 * (`__proto__`, or `constructor` holding a `prototype`: the keys Fastify's parser refuses by default). The
 * server parses without that refusal so that such a review still gets a well-formed denial, and denies it
 * before anything copies it. Iterative: a deeply nested body cannot overflow the stack.
 */
export function prototypeKey(value: unknown): string | undefined {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const v = pending.pop();
    if (typeof v !== 'object' || v === null) continue;
    if (Array.isArray(v)) {
      // One by one: a spread of a huge array would exceed the argument limit.
      for (const item of v) pending.push(item);
      continue;
    }
    for (const [key, child] of Object.entries(v)) {
      if (key === '__proto__') return key;
      if (key === 'constructor' && isRecord(child) && Object.hasOwn(child, 'prototype')) {
        return 'constructor.prototype';
      }
      pending.push(child);
    }
  }
  return undefined;
}

/** The apiVersion to answer in: the request's when it is one we speak, else v1. */
export function answerApiVersion(body: unknown): AdmissionApiVersion {
  const v = isRecord(body) ? body.apiVersion : undefined;
  return v === ADMISSION_V1BETA1 ? ADMISSION_V1BETA1 : ADMISSION_V1;
}

/** One line naming the first problems of a malformed review, without echoing its content. */
export function describeIssues(error: z.ZodError, max = 3): string {
  return error.issues
    .slice(0, max)
    .map((i) => `${i.path.length > 0 ? i.path.join('.') : '(root)'}: ${i.message}`)
    .join('; ');
}

// ---- decisions ----

export interface Allowed {
  allowed: true;
  patch?: JsonPatchOp[];
  warnings?: string[];
}

export interface Denied {
  allowed: false;
  /** HTTP-style code in status.code: 403 for a rule, 400 for a malformed review, 5xx for our own failures. */
  code: number;
  /** Short stable reason, the `reason` label of berth_webhook_admission_rejections_total. */
  reason: string;
  message: string;
}

export type Decision = Allowed | Denied;

export const allow = (extra: Omit<Allowed, 'allowed'> = {}): Allowed => ({ allowed: true, ...extra });

export const deny = (reason: string, message: string, code = 403): Denied => ({
  allowed: false,
  code: code >= 400 && code <= 599 ? code : 403,
  reason,
  message,
});

// ---- responses ----

export interface AdmissionStatus {
  code: number;
  reason: string;
  message: string;
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: AdmissionStatus;
  patchType?: 'JSONPatch';
  /** base64 of a JSON Patch array. */
  patch?: string;
  warnings?: string[];
}

export interface AdmissionReviewResponse {
  apiVersion: AdmissionApiVersion;
  kind: 'AdmissionReview';
  response: AdmissionResponse;
}

const STATUS_REASONS: Record<number, string> = {
  400: 'BadRequest',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** Warnings are shown to users verbatim: keep each short (kube truncates long ones). */
const MAX_WARNING = 120;

export function reviewResponse(
  apiVersion: AdmissionApiVersion,
  uid: string,
  decision: Decision,
): AdmissionReviewResponse {
  const response: AdmissionResponse = { uid, allowed: decision.allowed };
  if (decision.allowed) {
    if (decision.patch !== undefined && decision.patch.length > 0) {
      response.patchType = 'JSONPatch';
      response.patch = Buffer.from(JSON.stringify(decision.patch)).toString('base64');
    }
    if (decision.warnings !== undefined && decision.warnings.length > 0) {
      response.warnings = decision.warnings.map((w) =>
        w.length > MAX_WARNING ? w.slice(0, MAX_WARNING) : w,
      );
    }
  } else {
    response.status = {
      code: decision.code,
      reason: STATUS_REASONS[decision.code] ?? (decision.code >= 500 ? 'InternalError' : 'BadRequest'),
      message: decision.message,
    };
  }
  return { apiVersion, kind: 'AdmissionReview', response };
}
