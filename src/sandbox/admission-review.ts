// AdmissionReview on the wire, as kube-apiserver writes and reads it (webhook/request/admissionreview.go,
// client-go rest Result decoding). Pure functions: every error is thrown as a plain Error whose message
// is kube's wording; the caller adds the "failed to call webhook: " / "received invalid webhook
// response: " context kube adds.

import type { WebhookStatus } from './admission-errors.ts';
import type { AdmissionAttributes } from './admission-match.ts';
import type { JsonObject, JsonValue, KubeObject, StatusDetails } from './types.ts';

export type ReviewVersion = 'v1' | 'v1beta1';

/** CreateAdmissionObjects: the first version in the webhook's list that the API server speaks. */
export function pickReviewVersion(versions: string[] | undefined): ReviewVersion | undefined {
  return (versions ?? []).find((v): v is ReviewVersion => v === 'v1' || v === 'v1beta1');
}

export const NO_KNOWN_REVIEW_VERSION =
  'could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)';

function userInfoJson(attrs: AdmissionAttributes): JsonObject {
  // authenticationv1.UserInfo: every field is omitempty.
  const u = attrs.userInfo;
  const out: JsonObject = {};
  if (u.username) out.username = u.username;
  if (u.uid) out.uid = u.uid;
  if (u.groups.length > 0) out.groups = [...u.groups];
  if (u.extra && Object.keys(u.extra).length > 0) out.extra = structuredClone(u.extra);
  return out;
}

const asJson = (o: KubeObject | JsonObject | null): JsonValue =>
  o === null ? null : (structuredClone(o) as JsonObject);

/**
 * CreateV1AdmissionReview (v1beta1 has the same request shape). Field order and omitempty follow the Go
 * struct: empty subResource/name/namespace are left out; object, oldObject and options are always
 * present (null when absent). With one version per resource, kind/resource equal requestKind/requestResource.
 */
export function admissionReviewRequest(
  version: ReviewVersion,
  uid: string,
  attrs: AdmissionAttributes,
  object: KubeObject | null,
): JsonObject {
  const kind: JsonObject = { ...attrs.kind };
  const resource: JsonObject = { ...attrs.resource };
  const request: JsonObject = { uid, kind, resource };
  if (attrs.subResource) request.subResource = attrs.subResource;
  request.requestKind = { ...kind };
  request.requestResource = { ...resource };
  if (attrs.subResource) request.requestSubResource = attrs.subResource;
  if (attrs.name) request.name = attrs.name;
  if (attrs.namespace) request.namespace = attrs.namespace;
  request.operation = attrs.operation;
  request.userInfo = userInfoJson(attrs);
  request.object = asJson(object);
  request.oldObject = asJson(attrs.oldObject);
  request.dryRun = attrs.dryRun;
  request.options = asJson(attrs.options);
  return { kind: 'AdmissionReview', apiVersion: `admission.k8s.io/${version}`, request };
}

/** The CEL `request` variable of matchConditions: a typed AdmissionRequest, so every field is present. */
export function celAdmissionRequest(attrs: AdmissionAttributes): JsonObject {
  const u = attrs.userInfo;
  return {
    kind: { ...attrs.kind },
    resource: { ...attrs.resource },
    subResource: attrs.subResource,
    requestKind: { ...attrs.kind },
    requestResource: { ...attrs.resource },
    requestSubResource: attrs.subResource,
    name: attrs.name,
    namespace: attrs.namespace,
    operation: attrs.operation,
    userInfo: {
      username: u.username,
      uid: u.uid ?? '',
      groups: [...u.groups],
      extra: structuredClone(u.extra ?? {}),
    },
    dryRun: attrs.dryRun,
    options: asJson(attrs.options),
  };
}

/** Go's %q for the strings that appear in these messages. */
const goQuote = (s: string): string => JSON.stringify(s);

/**
 * client-go's error for a non-2xx answer: a metav1.Status body speaks for itself, anything else becomes
 * apierrors.NewGenericServerResponse's text (with the body for text responses, capped at 2048 bytes).
 */
export function serverResponseMessage(statusCode: number, contentType: string, body: string): string {
  try {
    const parsed: unknown = JSON.parse(body);
    if (isRecord(parsed) && parsed.kind === 'Status' && parsed.status === 'Failure') {
      return typeof parsed.message === 'string' ? parsed.message : '';
    }
  } catch {
    // not a Status; fall through to the generic message
  }
  const media = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  const isText = contentType === '' || media.startsWith('text/');
  const serverMessage = isText ? Buffer.from(body).subarray(0, 2048).toString().trim() : 'unknown';
  switch (statusCode) {
    case 409:
      return 'the server reported a conflict';
    case 404:
      return 'the server could not find the requested resource';
    case 400:
      return 'the server rejected our request for an unknown reason';
    case 401:
      return 'the server has asked for the client to provide credentials';
    case 403:
      return serverMessage;
    case 406:
      return serverMessage === '' || serverMessage === 'unknown'
        ? 'the server was unable to respond with a content type that the client supports'
        : serverMessage;
    case 415:
      return serverMessage === '' || serverMessage === 'unknown'
        ? 'the server does not support the media type transmitted in the request'
        : serverMessage;
    case 405:
      return 'the server does not allow this method on the requested resource';
    case 422:
      return 'the server rejected our request due to an error in our request';
    case 503:
      return 'the server is currently unable to handle the request';
    case 504:
      return 'the server was unable to return a response in the time allotted, but may still be processing the request';
    case 429:
      return 'the server has received too many requests and has asked us to try again later';
    default:
      return statusCode >= 500
        ? `an error on the server (${goQuote(serverMessage)}) has prevented the request from succeeding`
        : `the server responded with the status code ${statusCode} but did not return more information`;
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const jsonTypeName = (v: unknown): string =>
  Array.isArray(v) ? 'array' : v === null ? 'null' : typeof v === 'object' ? 'object' : typeof v;

const cannotUnmarshal = (value: unknown, field: string, goType: string): Error =>
  new Error(`json: cannot unmarshal ${jsonTypeName(value)} into Go struct field ${field} of type ${goType}`);

/** Go's base64.StdEncoding: strict alphabet and padding. */
export function decodeBase64Strict(s: string): Buffer {
  const bad = s.search(/[^A-Za-z0-9+/=]/);
  const pad = s.indexOf('=');
  if (bad >= 0) throw new Error(`illegal base64 data at input byte ${bad}`);
  if (s.length % 4 !== 0 || (pad >= 0 && (pad < s.length - 2 || /[^=]/.test(s.slice(pad))))) {
    throw new Error(`illegal base64 data at input byte ${pad >= 0 ? pad : s.length - (s.length % 4)}`);
  }
  return Buffer.from(s, 'base64');
}

/** What a decoded AdmissionReview answer carries (admissionv1.AdmissionResponse). */
export interface DecodedResponse {
  uid: string;
  allowed: boolean;
  patch: Buffer | undefined;
  patchType: string | undefined;
  status: WebhookStatus | undefined;
  auditAnnotations: Record<string, string>;
  warnings: string[];
}

export interface DecodedReview {
  apiVersion: string;
  kind: string;
  response: DecodedResponse | undefined;
}

function optionalString(r: Record<string, unknown>, key: string, field: string): string | undefined {
  const v = r[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw cannotUnmarshal(v, field, 'string');
  return v;
}

function decodeStatus(v: unknown): WebhookStatus | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isRecord(v)) throw cannotUnmarshal(v, 'AdmissionResponse.response.status', 'v1.Status');
  const status: WebhookStatus = {};
  if (v.code !== undefined && v.code !== null) {
    if (typeof v.code !== 'number' || !Number.isInteger(v.code)) {
      throw cannotUnmarshal(v.code, 'Status.response.status.code', 'int32');
    }
    status.code = v.code;
  }
  const message = optionalString(v, 'message', 'Status.response.status.message');
  const reason = optionalString(v, 'reason', 'Status.response.status.reason');
  const state = optionalString(v, 'status', 'Status.response.status.status');
  if (message !== undefined) status.message = message;
  if (reason !== undefined) status.reason = reason;
  if (state !== undefined) status.status = state;
  if (isRecord(v.details)) status.details = v.details as StatusDetails;
  return status;
}

function decodeStringMap(v: unknown, field: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isRecord(v)) throw cannotUnmarshal(v, field, 'map[string]string');
  const out: Record<string, string> = {};
  for (const [k, value] of Object.entries(v)) {
    if (typeof value !== 'string') throw cannotUnmarshal(value, field, 'string');
    out[k] = value;
  }
  return out;
}

function decodeResponse(v: unknown): DecodedResponse | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isRecord(v)) throw cannotUnmarshal(v, 'AdmissionReview.response', 'v1.AdmissionResponse');
  const allowed = v.allowed ?? false;
  if (typeof allowed !== 'boolean')
    throw cannotUnmarshal(allowed, 'AdmissionResponse.response.allowed', 'bool');
  const patch = optionalString(v, 'patch', 'AdmissionResponse.response.patch');
  const warnings = v.warnings ?? [];
  if (!Array.isArray(warnings) || warnings.some((w) => typeof w !== 'string')) {
    throw cannotUnmarshal(warnings, 'AdmissionResponse.response.warnings', '[]string');
  }
  return {
    uid: optionalString(v, 'uid', 'AdmissionResponse.response.uid') ?? '',
    allowed,
    patch: patch === undefined ? undefined : decodeBase64Strict(patch),
    patchType: optionalString(v, 'patchType', 'AdmissionResponse.response.patchType'),
    status: decodeStatus(v.status),
    auditAnnotations: decodeStringMap(v.auditAnnotations, 'AdmissionResponse.response.auditAnnotations'),
    warnings: warnings as string[],
  };
}

/** client-go Result.Into + the JSON serializer: the errors a 2xx body can fail with. */
export function decodeReview(body: string, statusCode: number, contentType: string): DecodedReview {
  if (body.length === 0) {
    throw new Error(`0-length response with status code: ${statusCode} and content type: ${contentType}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (err) {
    throw new Error(
      `couldn't get version/kind; json parse error: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  if (!isRecord(parsed)) {
    throw new Error(
      `couldn't get version/kind; json parse error: cannot unmarshal ${jsonTypeName(parsed)} into object`,
    );
  }
  if (typeof parsed.kind !== 'string' || parsed.kind === '')
    throw new Error(`Object 'Kind' is missing in '${body}'`);
  return {
    apiVersion: typeof parsed.apiVersion === 'string' ? parsed.apiVersion : '',
    kind: parsed.kind,
    response: decodeResponse(parsed.response),
  };
}

/** gvk.String() of an apiVersion/kind pair: `admission.k8s.io/v1, Kind=AdmissionReview`. */
const gvkString = (apiVersion: string, kind: string): string => `${apiVersion}, Kind=${kind}`;

/** VerifyAdmissionResponse. v1 checks the answer's identity and patch fields; v1beta1 never did. */
export function verifyAdmissionResponse(
  uid: string,
  mutating: boolean,
  version: ReviewVersion,
  review: DecodedReview,
): DecodedResponse {
  const expected = `admission.k8s.io/${version}`;
  // The serializer refuses another group/version before VerifyAdmissionResponse looks; one message covers both.
  if (version === 'v1' && (review.apiVersion !== expected || review.kind !== 'AdmissionReview')) {
    throw new Error(
      `expected webhook response of ${gvkString(expected, 'AdmissionReview')}, got ${gvkString(review.apiVersion, review.kind)}`,
    );
  }
  const r = review.response;
  if (!r) throw new Error('webhook response was absent');
  if (version === 'v1beta1') {
    // v1beta1 pinned the patch type to the only one supported and ignored patches from validating webhooks.
    const patch = mutating && r.patch && r.patch.length > 0 ? r.patch : undefined;
    return { ...r, patch, patchType: patch ? 'JSONPatch' : undefined };
  }
  if (r.uid !== uid) throw new Error(`expected response.uid=${goQuote(uid)}, got ${goQuote(r.uid)}`);
  const hasPatch = r.patch !== undefined && r.patch.length > 0;
  if (mutating) {
    if (hasPatch && r.patchType === undefined)
      throw new Error('webhook returned response.patch but not response.patchType');
    if (!hasPatch && r.patchType !== undefined)
      throw new Error('webhook returned response.patchType but not response.patch');
    if (r.patchType === '') throw new Error(`webhook returned invalid response.patchType of ${goQuote('')}`);
    return r;
  }
  if (hasPatch) throw new Error('validating webhook may not return response.patch');
  if (r.patchType !== undefined) throw new Error('validating webhook may not return response.patchType');
  return r;
}

export interface PatchOperation {
  op: string;
  path: string;
  [key: string]: unknown;
}

/** jsonpatch.DecodePatch: a JSON array of operation objects. */
export function decodePatch(patch: Buffer): PatchOperation[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(patch.toString('utf8'));
  } catch (err) {
    throw new Error(err instanceof Error ? err.message : String(err));
  }
  if (!Array.isArray(parsed)) {
    throw new Error(`json: cannot unmarshal ${jsonTypeName(parsed)} into Go value of type jsonpatch.Patch`);
  }
  for (const op of parsed) {
    if (!isRecord(op))
      throw new Error(`json: cannot unmarshal ${jsonTypeName(op)} into Go value of type jsonpatch.Operation`);
  }
  return parsed as PatchOperation[];
}
