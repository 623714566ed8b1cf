// The HTTPS front of the sandbox: authentication, optional RBAC, fault injection, URL routing to
// discovery and to the resource storage, content negotiation (JSON, server-side Tables), watch streams.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { apiVersions, group, groupList, resourceList } from './discovery.ts';
import { type Faults, reasonForCode } from './faults.ts';
import {
  type DeleteOptions,
  type ObjectService,
  PATCH_CONTENT_TYPES,
  type RequestContext,
  rfc3339,
} from './objects.ts';
import { openApiV2, openApiV3Document, openApiV3Root } from './openapi.ts';
import { applyJsonPatch, applyMergePatch } from './patch.ts';
import { type AuthorizationAttributes, authorize, forbiddenError, type RbacObjects } from './rbac.ts';
import { apiVersionOf, type Registry, type ResourceType } from './registry.ts';
import { parseFieldSelector, parseLabelSelector } from './selectors.ts';
import { objectKey, type Store } from './store.ts';
import { buildTable } from './tables.ts';
import { badRequest, type JsonObject, type KubeObject, StatusError, type UserInfo } from './types.ts';
import { serveWatch } from './watch.ts';

export const MAX_BODY_BYTES = 3 * 1024 * 1024;

export interface ServerDeps {
  store: Store;
  registry: Registry;
  objects: ObjectService;
  faults: Faults;
  authenticate(token: string | undefined): UserInfo | undefined;
  /** Issues a bearer token that authenticates as `user` (TokenRequest). */
  issueToken(user: UserInfo): string;
  rbac: RbacObjects | undefined;
  now(): number;
  serverAddress(): string;
  bookmarkIntervalMs: number;
}

/** The name a `fieldSelector` requires with `metadata.name=<name>` (or `==`), else ''. */
function exactNameSelector(query: URLSearchParams): string {
  for (const term of (query.get('fieldSelector') ?? '').split(',')) {
    const m = /^metadata\.name==?(.+)$/.exec(term.trim());
    if (m?.[1]) return m[1];
  }
  return '';
}

interface ResourceRequest {
  verb: string;
  type: ResourceType;
  namespace: string;
  name: string;
  subresource: string;
  query: URLSearchParams;
}

const json = (
  res: ServerResponse,
  code: number,
  body: unknown,
  headers: Record<string, string> = {},
): void => {
  const text = JSON.stringify(body);
  res.writeHead(code, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
};

function sendError(res: ServerResponse, err: unknown): void {
  const status =
    err instanceof StatusError
      ? err
      : new StatusError(
          500,
          'InternalError',
          `Internal error occurred: ${(err as Error)?.message ?? String(err)}`,
        );
  const headers: Record<string, string> = {};
  if (status.details?.retryAfterSeconds) headers['Retry-After'] = String(status.details.retryAfterSeconds);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  json(res, status.code, status.toStatus(), headers);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES)
      throw new StatusError(
        413,
        'RequestEntityTooLarge',
        `Request entity too large: limit is ${MAX_BODY_BYTES}`,
      );
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw badRequest(`couldn't get version/kind; json parse error: ${(err as Error).message}`);
  }
}

/** kube-apiserver's managerOrUserAgent: the fieldManager parameter, else the user agent's product. */
function fieldManagerOf(query: URLSearchParams, userAgent: string | undefined): string {
  const explicit = query.get('fieldManager');
  if (explicit) return explicit;
  const ua = (userAgent ?? 'unknown').split('/')[0] ?? 'unknown';
  return ua.slice(0, 128) || 'unknown';
}

function dryRunOf(query: URLSearchParams, body?: { dryRun?: unknown }): boolean {
  const values = [
    ...query.getAll('dryRun'),
    ...(Array.isArray(body?.dryRun) ? (body.dryRun as string[]) : []),
  ];
  for (const v of values) if (v !== 'All') throw badRequest(`Invalid dry run value: ${v}`);
  return values.length > 0;
}

function fieldValidationOf(query: URLSearchParams): RequestContext['fieldValidation'] {
  const value = query.get('fieldValidation');
  if (value === null || value === '') return 'Warn';
  if (value === 'Strict' || value === 'Warn' || value === 'Ignore') return value;
  throw badRequest(`fieldValidation must be one of "Ignore", "Warn", or "Strict", got "${value}"`);
}

const wantsTable = (accept: string | undefined): boolean => !!accept && /as=Table/.test(accept);

function checkAccept(accept: string | undefined): void {
  if (!accept) return;
  const types = accept.split(',').map((t) => t.split(';')[0]!.trim());
  if (
    types.some(
      (t) => t === '*/*' || t === 'application/json' || t === 'application/*' || t === 'application/yaml',
    )
  )
    return;
  throw new StatusError(
    406,
    'NotAcceptable',
    `only the following media types are accepted: application/json, application/yaml`,
  );
}

export class SandboxHttp {
  private readonly deps: ServerDeps;

  constructor(deps: ServerDeps) {
    this.deps = deps;
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    this.route(req, res).catch((err: unknown) => sendError(res, err));
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'https://sandbox');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const auth = req.headers.authorization;
    const user = this.deps.authenticate(auth?.startsWith('Bearer ') ? auth.slice(7).trim() : undefined);
    if (!user) throw new StatusError(401, 'Unauthorized', 'Unauthorized');
    if (path === '/healthz' || path === '/readyz' || path === '/livez') {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end('ok');
      return;
    }
    const segments = path.split('/').filter(Boolean).map(decodeURIComponent);
    if (segments[0] !== 'api' && segments[0] !== 'apis') return this.nonResource(req, res, path, user);
    const info = this.resolve(req, segments, url.searchParams);
    if (!info) return this.discovery(req, res, path, segments, user);
    this.authorize(user, info);
    await this.applyFaults(req, info, user);
    if (res.writableEnded || res.destroyed) return;
    await this.serve(req, res, info, user);
  }

  private nonResource(req: IncomingMessage, res: ServerResponse, path: string, user: UserInfo): void {
    this.authorizeNonResource(user, path, req.method ?? 'GET');
    if (path === '/version') {
      json(res, 200, {
        major: '1',
        minor: '32',
        gitVersion: 'v1.32.0-berth-sandbox',
        gitCommit: '0000000000000000000000000000000000000000',
        gitTreeState: 'clean',
        buildDate: '2026-01-01T00:00:00Z',
        goVersion: 'go1.23.0',
        compiler: 'gc',
        platform: 'linux/amd64',
      });
      return;
    }
    if (path === '/openapi/v2') {
      json(res, 200, openApiV2(this.deps.registry));
      return;
    }
    if (path === '/openapi/v3') {
      json(res, 200, openApiV3Root(this.deps.registry));
      return;
    }
    if (path.startsWith('/openapi/v3/')) {
      const doc = openApiV3Document(this.deps.registry, path.slice('/openapi/v3/'.length));
      if (doc) {
        json(res, 200, doc);
        return;
      }
    }
    throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
  }

  private discovery(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    segments: string[],
    user: UserInfo,
  ): void {
    this.authorizeNonResource(user, path, req.method ?? 'GET');
    const { registry } = this.deps;
    let doc: JsonObject | undefined;
    if (segments[0] === 'api') {
      if (segments.length === 1) doc = apiVersions(this.deps.serverAddress());
      else if (segments.length === 2 && segments[1] === 'v1') doc = resourceList(registry, '', 'v1');
    } else if (segments.length === 1) doc = groupList(registry);
    else if (segments.length === 2) doc = group(registry, segments[1]!);
    else if (segments.length === 3) doc = resourceList(registry, segments[1]!, segments[2]!);
    if (!doc) throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    json(res, 200, doc);
  }

  /** Maps a REST path to a resource request, or undefined for discovery paths. */
  private resolve(
    req: IncomingMessage,
    segments: string[],
    query: URLSearchParams,
  ): ResourceRequest | undefined {
    let rest: string[];
    let groupName: string;
    let version: string;
    if (segments[0] === 'api') {
      if (segments.length < 3) return undefined;
      groupName = '';
      version = segments[1]!;
      rest = segments.slice(2);
    } else {
      if (segments.length < 4) return undefined;
      groupName = segments[1]!;
      version = segments[2]!;
      rest = segments.slice(3);
    }
    let watchPath = false;
    if (rest[0] === 'watch') {
      watchPath = true;
      rest = rest.slice(1);
    }
    let namespace = '';
    if (
      rest[0] === 'namespaces' &&
      rest.length >= 3 &&
      !(groupName === '' && (rest[2] === 'status' || rest[2] === 'finalize') && rest.length === 3)
    ) {
      namespace = rest[1]!;
      rest = rest.slice(2);
    }
    const [resource, name = '', subresource = ''] = rest as [string, string?, string?];
    if (rest.length > 3)
      throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    const type = this.deps.registry.get(groupName, version, resource);
    if (!type) {
      throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    }
    if (
      type.namespaced !== (namespace !== '') &&
      !(type.namespaced && !name && (req.method === 'GET' || req.method === 'DELETE') && !namespace)
    ) {
      if (!type.namespaced && namespace)
        throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
      if (type.namespaced && name)
        throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    }
    if (subresource && !(type.subresources as string[]).includes(subresource)) {
      throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    }
    const method = req.method ?? 'GET';
    const watch = watchPath || query.get('watch') === 'true' || query.get('watch') === '1';
    let verb: string;
    switch (method) {
      case 'GET':
        verb = name ? 'get' : watch ? 'watch' : 'list';
        break;
      case 'POST':
        verb = 'create';
        break;
      case 'PUT':
        verb = 'update';
        break;
      case 'PATCH':
        verb = 'patch';
        break;
      case 'DELETE':
        verb = name ? 'delete' : 'deletecollection';
        break;
      default:
        throw new StatusError(405, 'MethodNotAllowed', `${method} is not supported`);
    }
    if (watch && name) verb = 'watch';
    if (verb === 'create' && name && subresource !== 'binding' && subresource !== 'token')
      throw new StatusError(
        405,
        'MethodNotAllowed',
        'the server does not allow this method on the requested resource',
      );
    if ((verb === 'update' || verb === 'patch') && !name)
      throw new StatusError(
        405,
        'MethodNotAllowed',
        'the server does not allow this method on the requested resource',
      );
    return { verb, type, namespace, name, subresource, query };
  }

  private authorize(user: UserInfo, info: ResourceRequest): void {
    if (!this.deps.rbac) return;
    const attrs: AuthorizationAttributes = {
      user,
      verb: info.verb,
      apiGroup: info.type.group,
      resource: info.type.resource,
      subresource: info.subresource,
      // kube-apiserver treats a Namespace as living in itself for authorization.
      namespace: info.type.group === '' && info.type.resource === 'namespaces' ? info.name : info.namespace,
      // kube-apiserver (requestinfo.go) authorizes a list or watch whose field selector requires an exact
      // metadata.name as a request for that name, so resourceNames rules can allow it.
      name: info.name || (info.verb === 'list' || info.verb === 'watch' ? exactNameSelector(info.query) : ''),
      resourceRequest: true,
      path: '',
    };
    const decision = authorize(attrs, this.deps.rbac);
    if (!decision.allowed) throw forbiddenError(attrs, decision.reason);
  }

  private authorizeNonResource(user: UserInfo, path: string, method: string): void {
    if (!this.deps.rbac) return;
    const attrs: AuthorizationAttributes = {
      user,
      verb: method.toLowerCase() === 'get' ? 'get' : method.toLowerCase(),
      apiGroup: '',
      resource: '',
      subresource: '',
      namespace: '',
      name: '',
      resourceRequest: false,
      path,
    };
    const decision = authorize(attrs, this.deps.rbac);
    if (!decision.allowed) throw forbiddenError(attrs, decision.reason);
  }

  private async applyFaults(req: IncomingMessage, info: ResourceRequest, user: UserInfo): Promise<void> {
    const rule = this.deps.faults.take({
      verb: info.verb,
      group: info.type.group,
      resource: info.type.resource,
      subresource: info.subresource,
      namespace: info.namespace,
      name: info.name,
      user: user.username,
    });
    if (!rule) return;
    if (rule.delayMs) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, rule.delayMs);
        req.socket.once('close', () => {
          clearTimeout(t);
          resolve();
        });
      });
      if (req.socket.destroyed) return;
    }
    if (rule.resetConnection) {
      req.socket.destroy();
      return;
    }
    if (rule.status) {
      const code = rule.status;
      const details = rule.retryAfterSeconds ? { retryAfterSeconds: rule.retryAfterSeconds } : undefined;
      throw new StatusError(
        code,
        rule.reason ?? reasonForCode(code),
        rule.message ?? `injected fault: ${code}`,
        details,
      );
    }
  }

  /**
   * `serviceaccounts/token` (TokenRequest, authentication.k8s.io/v1): a token for an existing
   * ServiceAccount, authenticated as `system:serviceaccount:<ns>:<name>` with its groups, as
   * `kubectl create token` gets it. Unlike kube-apiserver's, these tokens do not expire while the sandbox runs.
   */
  private tokenRequest(type: ResourceType, namespace: string, name: string, body: unknown): JsonObject {
    this.deps.objects.get(type, namespace, name);
    const spec = ((body as { spec?: unknown } | null)?.spec ?? {}) as {
      audiences?: unknown;
      expirationSeconds?: unknown;
    };
    const seconds = spec.expirationSeconds === undefined ? 3600 : Number(spec.expirationSeconds);
    if (!Number.isInteger(seconds) || seconds < 600)
      throw badRequest(
        'spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes',
      );
    const token = this.deps.issueToken({
      username: `system:serviceaccount:${namespace}:${name}`,
      groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
    });
    return {
      kind: 'TokenRequest',
      apiVersion: 'authentication.k8s.io/v1',
      metadata: { name, namespace, creationTimestamp: rfc3339(this.deps.now()) },
      spec: {
        audiences:
          Array.isArray(spec.audiences) && spec.audiences.length > 0
            ? spec.audiences
            : ['https://kubernetes.default.svc'],
        expirationSeconds: seconds,
      },
      status: {
        token,
        expirationTimestamp: rfc3339(this.deps.now() + seconds * 1000),
      },
    };
  }

  private context(
    req: IncomingMessage,
    info: ResourceRequest,
    user: UserInfo,
    body?: { dryRun?: unknown },
  ): RequestContext {
    return {
      user,
      dryRun: dryRunOf(info.query, body),
      fieldManager: fieldManagerOf(info.query, req.headers['user-agent']),
      warnings: [],
      fieldValidation: fieldValidationOf(info.query),
    };
  }

  private async serve(
    req: IncomingMessage,
    res: ServerResponse,
    info: ResourceRequest,
    user: UserInfo,
  ): Promise<void> {
    const { objects } = this.deps;
    const { type, namespace, name, subresource, query } = info;
    const accept = req.headers.accept;
    if (info.verb !== 'watch') checkAccept(accept);
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
    const bodyText = req.method === 'GET' ? '' : await readBody(req);
    if (
      bodyText &&
      info.verb !== 'patch' &&
      contentType &&
      contentType !== 'application/json' &&
      contentType !== 'application/yaml'
    ) {
      // kubectl's typed generators (`kubectl create configmap ...`) send protobuf, which the sandbox cannot decode.
      throw new StatusError(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (the sandbox API server does not decode ${contentType}; use kubectl apply or kubectl create -f)`,
      );
    }
    const warn = (ctx: RequestContext): Record<string, string> =>
      ctx.warnings.length
        ? { Warning: ctx.warnings.map((w) => `299 - ${JSON.stringify(w)}`).join(', ') }
        : {};

    switch (info.verb) {
      case 'get': {
        const obj = objects.get(type, namespace, name);
        if (subresource === 'scale') return json(res, 200, objects.scaleOf(obj));
        if (wantsTable(accept))
          return json(res, 200, this.table(type, [obj], query, String(obj.metadata.resourceVersion)));
        return json(res, 200, obj);
      }
      case 'list':
        return this.list(res, info, accept);
      case 'watch': {
        const labels = parseLabelSelector(query.get('labelSelector') ?? undefined);
        const fieldSel = name ? `metadata.name=${name}` : (query.get('fieldSelector') ?? undefined);
        const fields = parseFieldSelector(fieldSel, this.supportedFields(type));
        const timeout = Number(query.get('timeoutSeconds') ?? '') || 1800 + Math.floor(Math.random() * 1800);
        serveWatch(res, this.deps.store, this.deps.faults, {
          type,
          namespace,
          labels,
          fields,
          resourceVersion: query.get('resourceVersion') ?? '',
          resourceVersionMatch: query.get('resourceVersionMatch') ?? '',
          allowBookmarks: query.get('allowWatchBookmarks') === 'true',
          sendInitialEvents: query.get('sendInitialEvents') === 'true',
          timeoutSeconds: timeout,
          bookmarkIntervalMs: this.deps.bookmarkIntervalMs,
        });
        return;
      }
      case 'create': {
        const body = parseJson(bodyText);
        const ctx = this.context(req, info, user);
        if (subresource === 'binding' || (type.resource === 'bindings' && type.group === '')) {
          await objects.bind(namespace, name, body, ctx);
          return json(
            res,
            201,
            { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 },
            warn(ctx),
          );
        }
        if (subresource === 'token') return json(res, 201, this.tokenRequest(type, namespace, name, body));
        const created = await objects.create(type, namespace, body, ctx);
        return json(res, 201, created, warn(ctx));
      }
      case 'update': {
        const body = parseJson(bodyText);
        const ctx = this.context(req, info, user);
        if (subresource === 'scale') {
          const updated = await objects.updateScale(type, namespace, name, () => body as KubeObject, ctx);
          return json(res, 200, updated, warn(ctx));
        }
        const updated = await objects.update(type, namespace, name, body, subresource as '' | 'status', ctx);
        return json(res, 200, updated, warn(ctx));
      }
      case 'patch': {
        const patchType = PATCH_CONTENT_TYPES[contentType];
        if (!patchType) {
          throw new StatusError(
            415,
            'UnsupportedMediaType',
            `the body of the request was in an unknown format - accepted media types include: ${Object.keys(PATCH_CONTENT_TYPES).join(', ')}`,
          );
        }
        const ctx = this.context(req, info, user);
        if (patchType === 'apply' && !query.get('fieldManager')) {
          throw badRequest('PATCH, application/apply-patch+yaml: fieldManager is required for apply patch');
        }
        const force = query.get('force') === 'true';
        if (subresource === 'scale') {
          const patchBody = parseJson(bodyText);
          const updated = await objects.updateScale(
            type,
            namespace,
            name,
            (scale) =>
              patchType === 'json' ? applyJsonPatch(scale, patchBody) : applyMergePatch(scale, patchBody),
            ctx,
          );
          return json(res, 200, updated, warn(ctx));
        }
        const result = await objects.patch(
          type,
          namespace,
          name,
          patchType,
          bodyText,
          subresource as '' | 'status',
          ctx,
          force,
        );
        return json(res, result.created ? 201 : 200, result.object, warn(ctx));
      }
      case 'delete': {
        const body = (bodyText ? parseJson(bodyText) : {}) as DeleteOptions & { dryRun?: unknown };
        const opts = this.deleteOptions(query, body);
        const ctx = this.context(req, info, user, body);
        const result = await objects.delete(type, namespace, name, opts, ctx);
        if (!result.removed || this.returnsObject(type)) return json(res, 200, result.object, warn(ctx));
        return json(
          res,
          200,
          {
            kind: 'Status',
            apiVersion: 'v1',
            metadata: {},
            status: 'Success',
            details: { name, group: type.group, kind: type.resource, uid: result.object.metadata.uid },
          },
          warn(ctx),
        );
      }
      case 'deletecollection': {
        const body = (bodyText ? parseJson(bodyText) : {}) as DeleteOptions & { dryRun?: unknown };
        const opts = this.deleteOptions(query, body);
        const ctx = this.context(req, info, user, body);
        const labels = parseLabelSelector(query.get('labelSelector') ?? undefined);
        const fields = parseFieldSelector(
          query.get('fieldSelector') ?? undefined,
          this.supportedFields(type),
        );
        const { items, resourceVersion } = objects.list(type, namespace, labels, fields);
        const deleted: KubeObject[] = [];
        for (const item of items) {
          const r = await objects.delete(
            type,
            item.metadata.namespace ?? '',
            item.metadata.name ?? '',
            opts,
            ctx,
          );
          deleted.push(r.object);
        }
        return json(
          res,
          200,
          {
            kind: type.listKind,
            apiVersion: apiVersionOf(type),
            metadata: { resourceVersion },
            items: deleted,
          },
          warn(ctx),
        );
      }
    }
  }

  private returnsObject(type: ResourceType): boolean {
    return type.custom || (type.group === '' && ['pods', 'services', 'namespaces'].includes(type.resource));
  }

  private deleteOptions(query: URLSearchParams, body: DeleteOptions): DeleteOptions {
    const opts: DeleteOptions = {};
    const policy = query.get('propagationPolicy') ?? body.propagationPolicy;
    if (policy !== undefined && policy !== null) {
      if (!['Background', 'Foreground', 'Orphan'].includes(policy)) {
        throw new StatusError(
          422,
          'Invalid',
          `propagationPolicy: Unsupported value: "${policy}": supported values: "Foreground", "Background", "Orphan"`,
        );
      }
      opts.propagationPolicy = policy as DeleteOptions['propagationPolicy'];
    }
    const grace = query.get('gracePeriodSeconds') ?? body.gracePeriodSeconds;
    if (grace !== undefined && grace !== null) opts.gracePeriodSeconds = Number(grace);
    if (body.preconditions) opts.preconditions = body.preconditions;
    return opts;
  }

  private supportedFields(type: ResourceType): string[] {
    return ['metadata.name', 'metadata.namespace', ...type.fieldSelectors];
  }

  private list(res: ServerResponse, info: ResourceRequest, accept: string | undefined): void {
    const { type, namespace, query } = info;
    const labels = parseLabelSelector(query.get('labelSelector') ?? undefined);
    const fields = parseFieldSelector(query.get('fieldSelector') ?? undefined, this.supportedFields(type));
    let { items, resourceVersion } = this.deps.objects.list(type, namespace, labels, fields);
    const limit = Number(query.get('limit') ?? '0');
    const token = query.get('continue');
    if (token) {
      const decoded = decodeContinue(token);
      resourceVersion = decoded.rv;
      items = items.filter((o) => objectKey(o.metadata.namespace, o.metadata.name ?? '') > decoded.start);
    }
    const meta: JsonObject = { resourceVersion };
    if (limit > 0 && items.length > limit) {
      const remaining = items.length - limit;
      items = items.slice(0, limit);
      const last = items[items.length - 1]!;
      meta.continue = encodeContinue(
        resourceVersion,
        objectKey(last.metadata.namespace, last.metadata.name ?? ''),
      );
      if (labels.length === 0 && fields.length === 0) meta.remainingItemCount = remaining;
    }
    if (wantsTable(accept)) {
      json(res, 200, this.table(type, items, query, resourceVersion, meta.continue as string | undefined));
      return;
    }
    // Stream the list: 20k Pods serialised at once would be a single huge string.
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.write(
      `{"kind":${JSON.stringify(type.listKind)},"apiVersion":${JSON.stringify(apiVersionOf(type))},"metadata":${JSON.stringify(meta)},"items":[`,
    );
    const BATCH = 200;
    for (let i = 0; i < items.length; i += BATCH) {
      const part = items
        .slice(i, i + BATCH)
        .map((o) => JSON.stringify(o))
        .join(',');
      res.write(i === 0 ? part : `,${part}`);
    }
    res.end(']}');
  }

  private table(
    type: ResourceType,
    items: KubeObject[],
    query: URLSearchParams,
    resourceVersion: string,
    continueToken?: string,
  ): JsonObject {
    const include = query.get('includeObject') ?? 'Metadata';
    return buildTable(type.kind, items, {
      includeObject: include as 'None' | 'Metadata' | 'Object',
      now: this.deps.now(),
      ...(type.printerColumns ? { printerColumns: type.printerColumns } : {}),
      resourceVersion,
      ...(continueToken ? { continueToken } : {}),
    });
  }
}

function encodeContinue(rv: string, start: string): string {
  return Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: Number(rv), start })).toString('base64url');
}

function decodeContinue(token: string): { rv: string; start: string } {
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as {
      rv?: number;
      start?: string;
    };
    if (typeof parsed.rv !== 'number' || typeof parsed.start !== 'string') throw new Error('incomplete');
    return { rv: String(parsed.rv), start: parsed.start };
  } catch {
    throw badRequest(
      'continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)',
    );
  }
}
