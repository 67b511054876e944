import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig, loadYaml } from '@kubernetes/client-node';
import { matchesFields, parseFieldSelector } from './field-selectors';
import { openApiDocument, unknownFields, withoutFields } from './openapi';
import { decodeProtobufBody } from './protobuf';
import { isJsonObject, type Json, type JsonObject } from './patches';
import {
  authenticatedGroup,
  mastersGroup,
  requestAttributes,
  type Decision,
  type RequestAttributes,
  type UserInfo,
} from './rbac';
import { KubeApiError } from './api-error';
import { matchesLabels, parseLabelSelector } from './label-selectors';
import {
  apiVersionOf,
  ObjectStore,
  resources,
  type PatchType,
  type ResourceName,
  type StoredObject,
  type WatchEvent,
} from './store';
import { includeObjectOf, requestedTableVersion, toTable } from './tables';

export interface FakeKubeApiServerOptions {
  /** How often a watch that asked for bookmarks gets one (default 1 s). */
  readonly bookmarkIntervalMs?: number;
  /**
   * When set, every request must carry `Authorization: Bearer <token>`: this token (the admin's)
   * or one the server minted (`tokenFor`, `kubeConfig({ as })`).
   */
  readonly token?: string;
  /** Report a compacted watch resourceVersion as HTTP 410 instead of an in-stream ERROR event. */
  readonly goneAsHttpStatus?: boolean;
  /**
   * Authorise every request, as the API server does (e.g. an `RbacAuthorizer` over the project's
   * manifests): a request needs a token the server knows, and one its user may not make gets 403
   * and is recorded in `denials`.
   */
  readonly rbac?: Authorizer;
}

export interface Authorizer {
  authorize(user: UserInfo, request: RequestAttributes): Decision;
}

/** A request the authorizer refused. */
export interface Denial {
  readonly user: string;
  readonly method: string;
  readonly request: RequestAttributes;
  readonly message: string;
}

/** Who the server's own kubeconfig (`kubeConfig()` with no identity) acts as: beyond RBAC. */
export const adminUser: UserInfo = { name: 'admin', groups: [mastersGroup, authenticatedGroup] };

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly contentType: string | undefined;
  readonly status: number;
  /** The authenticated user, when the request carried a token the server knows. */
  readonly user: string | undefined;
}

export interface RequestMatcher {
  readonly method?: string;
  readonly path?: RegExp;
}

interface PendingFailure {
  remaining: number;
  readonly status: number;
  readonly match: RequestMatcher;
}

interface Route {
  readonly resource: ResourceName;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
  readonly subresource: 'status' | undefined;
}

interface Snapshot {
  readonly items: StoredObject[];
  readonly resourceVersion: string;
}

const patchTypes: Record<string, PatchType> = {
  'application/json-patch+json': 'json',
  'application/merge-patch+json': 'merge',
  'application/strategic-merge-patch+json': 'strategic',
};

/**
 * An in-process Kubernetes API server for core/v1 Services, Nodes, Events and Namespaces and
 * discovery.k8s.io/v1 EndpointSlices, spoken to over real HTTP. It keeps the semantics clients
 * depend on (resourceVersions, paginated lists, resumable watches, finalizers, the status
 * subresource, patch types and server-side apply, dry runs, selectors, Status errors), speaks
 * what kubectl sends and asks for (Tables, OpenAPI, protobuf bodies), and has hooks to inject the
 * faults a controller must survive.
 */
export class FakeKubeApiServer {
  readonly store = new ObjectStore();
  readonly requests: RecordedRequest[] = [];
  /** Requests refused by the `rbac` authorizer (none without one). */
  readonly denials: Denial[] = [];
  private readonly server: Server;
  private readonly users = new Map<string, UserInfo>();
  private readonly watches = new Set<ServerResponse>();
  private readonly bookmarkers = new Set<() => void>();
  private readonly snapshots = new Map<string, Snapshot>();
  private nextSnapshot = 1;
  private failures: PendingFailure[] = [];
  private latencyMs = 0;

  private constructor(private readonly options: FakeKubeApiServerOptions) {
    this.server = createServer((req, res) => {
      void this.handle(req, res);
    });
    this.users.set(this.adminToken, adminUser);
  }

  static async start(options: FakeKubeApiServerOptions = {}): Promise<FakeKubeApiServer> {
    const fake = new FakeKubeApiServer(options);
    await new Promise<void>((resolve, reject) => {
      fake.server.once('error', reject);
      fake.server.listen(0, '127.0.0.1', () => resolve());
    });
    return fake;
  }

  get url(): string {
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  /**
   * A client configuration for this server (plain HTTP needs skipTLSVerify in client-node), as
   * the admin or, with `as`, with a token that authenticates as that user.
   */
  kubeConfig(options: { as?: UserInfo } = {}): KubeConfig {
    const kc = new KubeConfig();
    const token = options.as === undefined ? this.adminToken : this.tokenFor(options.as);
    kc.loadFromOptions({
      clusters: [{ name: 'fake', server: this.url, skipTLSVerify: true }],
      users: [{ name: 'fake', token }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'fake' }],
      currentContext: 'fake',
    });
    return kc;
  }

  /** The same configuration as a kubeconfig file's text (JSON is valid YAML). */
  kubeconfigText(options: { as?: UserInfo } = {}): string {
    return this.kubeConfig(options).exportConfig();
  }

  /** A bearer token this server authenticates as `user` (the same one for the same user). */
  tokenFor(user: UserInfo): string {
    for (const [token, known] of this.users) {
      if (known.name === user.name && sameGroups(known.groups, user.groups)) return token;
    }
    const token = `fake-${randomBytes(16).toString('hex')}`;
    this.users.set(token, { name: user.name, groups: [...user.groups] });
    return token;
  }

  get openWatches(): number {
    return this.watches.size;
  }

  /** The next `count` requests (matching `match`) fail with `status` (429 carries Retry-After). */
  failNextRequests(count: number, status: number, match: RequestMatcher = {}): void {
    this.failures.push({ remaining: count, status, match });
  }

  setLatency(ms: number): void {
    this.latencyMs = ms;
  }

  /** Ends every open watch cleanly, as the API server does on its timeout or a restart. */
  dropWatches(): void {
    for (const res of this.watches) res.end();
  }

  /** Cuts every open watch connection abruptly (the client sees a network error). */
  resetWatches(): void {
    for (const res of this.watches) res.socket?.destroy();
  }

  /** Sends a BOOKMARK now to every watch that asked for bookmarks. */
  sendBookmarks(): void {
    for (const send of this.bookmarkers) send();
  }

  /** Compacts history and forgets list snapshots: older resourceVersions and continue tokens get 410. */
  compact(): void {
    this.store.compact();
    this.snapshots.clear();
  }

  async stop(): Promise<void> {
    this.resetWatches();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const method = req.method ?? 'GET';
    const user = this.users.get(bearerToken(req) ?? '');
    res.on('finish', () => {
      this.requests.push({
        method,
        path: url.pathname,
        query: url.searchParams,
        contentType: req.headers['content-type'],
        status: res.statusCode,
        user: user?.name,
      });
    });
    try {
      if (this.latencyMs > 0) await sleep(this.latencyMs);
      // Authentication, then authorisation, then the handler: the API server's order.
      if ((this.options.token !== undefined || this.options.rbac) && user === undefined) {
        throw new KubeApiError(401, 'Unauthorized', 'Unauthorized');
      }
      if (this.options.rbac && user !== undefined) {
        this.authorize(this.options.rbac, user, method, url);
      }
      this.injectFailure(method, url.pathname);
      if (url.pathname === '/version') {
        // One minor version from the kubectl 1.32 to 1.34 engineers have: no version-skew warning.
        sendJson(res, 200, {
          major: '1',
          minor: '33',
          gitVersion: 'v1.33.0',
          platform: 'linux/amd64',
        });
        return;
      }
      const discovery = discoveryDocument(url.pathname);
      if (discovery !== undefined && method === 'GET') {
        sendJson(res, 200, discovery);
        return;
      }
      const openapi = openApiDocument(url.pathname);
      if (openapi !== undefined && method === 'GET') {
        // Served as JSON only: a client that takes only the protobuf form is told so.
        const accept = req.headers.accept ?? '*/*';
        if (!/application\/json|\*\/\*/.test(accept)) {
          throw new KubeApiError(406, 'NotAcceptable', `only application/json is served here`);
        }
        sendJson(res, 200, openapi);
        return;
      }
      const route = parseRoute(url.pathname);
      // DELETE may carry DeleteOptions (kubectl puts its dryRun and preconditions there).
      const body =
        method === 'POST' || method === 'PUT' || method === 'PATCH' || method === 'DELETE'
          ? await readBody(req, method === 'DELETE' ? undefined : route.resource)
          : null;
      this.dispatch(method, route, url.searchParams, req, res, body);
    } catch (error) {
      if (res.headersSent) {
        res.end();
        return;
      }
      if (error instanceof KubeApiError) {
        if (error.code === 429) res.setHeader('Retry-After', '1');
        sendJson(res, error.code, statusBody(error));
      } else {
        sendJson(res, 500, statusBody(new KubeApiError(500, 'InternalError', String(error))));
      }
    }
  }

  private dispatch(
    method: string,
    route: Route,
    query: URLSearchParams,
    req: IncomingMessage,
    res: ServerResponse,
    body: Json,
  ): void {
    const { resource, namespace, name, subresource } = route;
    const ns = namespace ?? '';
    const write = writeMode(method, query, method === 'DELETE' ? body : null, this.store);
    const checked = (given: Json): Json => checkFields(resource, given, query, res);
    // Who writes, for managedFields: the fieldManager asked for, else the client's name.
    const manager = query.get('fieldManager') ?? managerOf(req.headers['user-agent']);
    const table = requestedTableVersion(req.headers.accept);
    // What kubectl get asks for: the server's own columns, the object as it asked (metadata).
    const asTable = (objects: StoredObject[], listMetadata?: JsonObject): JsonObject =>
      toTable(resource, objects, {
        version: table ?? 'v1',
        includeObject: includeObjectOf(query.get('includeObject')),
        now: Date.now(),
        ...(listMetadata ? { listMetadata } : {}),
      });
    if (name === undefined) {
      if (method === 'GET' && (query.get('watch') === 'true' || query.get('watch') === '1')) {
        this.watch(route, query, res, table === undefined ? undefined : asTable);
      } else if (method === 'GET') {
        const list = this.list(route, query);
        sendJson(
          res,
          200,
          table === undefined ? list : asTable(list.items as StoredObject[], object(list.metadata)),
        );
      } else if (method === 'POST') {
        if (resources[resource].namespaced && namespace === undefined) {
          throw new KubeApiError(405, 'MethodNotAllowed', 'create needs a namespace in the path');
        }
        sendJson(
          res,
          201,
          write(() => this.store.create(resource, ns, checked(body), manager)),
        );
      } else {
        throw new KubeApiError(405, 'MethodNotAllowed', `${method} is not allowed on a collection`);
      }
      return;
    }
    switch (method) {
      case 'GET': {
        const found = this.store.get(resource, ns, name);
        sendJson(res, 200, table === undefined ? found : asTable([found]));
        return;
      }
      case 'PUT':
        sendJson(
          res,
          200,
          write(() => this.store.update(resource, ns, name, checked(body), subresource, manager)),
        );
        return;
      case 'PATCH': {
        const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim() ?? '';
        if (contentType === 'application/apply-patch+yaml' && subresource === undefined) {
          this.serverSideApply(route, query, res, checked(body), write);
          return;
        }
        const type = patchTypes[contentType];
        if (type === undefined) {
          throw new KubeApiError(
            415,
            'UnsupportedMediaType',
            `the body of the request was in an unknown format: ${contentType}`,
          );
        }
        sendJson(
          res,
          200,
          write(() =>
            this.store.patch(
              resource,
              ns,
              name,
              type,
              // A JSON patch names paths, not fields: merge patches are checked field by field.
              type === 'json' ? body : checked(body),
              subresource,
              manager,
            ),
          ),
        );
        return;
      }
      case 'DELETE': {
        checkPreconditions(this.store.get(resource, ns, name), body);
        const deleted = write(() => this.store.delete(resource, ns, name));
        sendJson(res, 200, resource === 'services' ? deleted : successStatus(resource, name));
        return;
      }
      default:
        throw new KubeApiError(405, 'MethodNotAllowed', `${method} is not allowed`);
    }
  }

  /** `kubectl apply --server-side`: the manager is required, `force` takes fields over. */
  private serverSideApply(
    route: Route,
    query: URLSearchParams,
    res: ServerResponse,
    config: Json,
    write: <T>(run: () => T) => T,
  ): void {
    const manager = query.get('fieldManager');
    if (manager === null || manager === '') {
      throw new KubeApiError(
        400,
        'BadRequest',
        'PATCH /apply requests require the fieldManager query parameter',
      );
    }
    const force = query.get('force') === 'true';
    const { resource, namespace, name } = route;
    const existed = this.store.has(resource, namespace ?? '', name ?? '');
    const applied = write(() =>
      this.store.apply(resource, namespace ?? '', name ?? '', config, manager, force),
    );
    sendJson(res, existed ? 200 : 201, applied);
  }

  private list(route: Route, query: URLSearchParams): JsonObject {
    const kind = resources[route.resource].kind;
    const token = query.get('continue');
    let snapshot: Snapshot;
    let offset = 0;
    if (token) {
      const decoded = decodeContinue(token);
      const found = decoded && this.snapshots.get(decoded.snapshot);
      if (!decoded || !found) {
        throw new KubeApiError(
          410,
          'Expired',
          'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.',
        );
      }
      snapshot = found;
      offset = decoded.offset;
    } else {
      const fields = parseFieldSelector(route.resource, query.get('fieldSelector'));
      snapshot = {
        items: this.store
          .list(route.resource, {
            namespace: route.namespace,
            labelSelector: query.get('labelSelector') ?? undefined,
          })
          .filter((item) => matchesFields(route.resource, item, fields)),
        resourceVersion: String(this.store.currentRevision),
      };
    }
    const limit = Number(query.get('limit') ?? '0');
    const end = limit > 0 ? offset + limit : snapshot.items.length;
    const metadata: JsonObject = { resourceVersion: snapshot.resourceVersion };
    if (end < snapshot.items.length) {
      let id = decodeContinue(token ?? '')?.snapshot;
      if (id === undefined) {
        id = String(this.nextSnapshot++);
        this.snapshots.set(id, snapshot);
      }
      metadata.continue = Buffer.from(JSON.stringify({ snapshot: id, offset: end })).toString(
        'base64url',
      );
      metadata.remainingItemCount = snapshot.items.length - end;
    }
    return {
      apiVersion: apiVersionOf(route.resource),
      kind: `${kind}List`,
      metadata,
      items: snapshot.items.slice(offset, end),
    };
  }

  private watch(
    route: Route,
    query: URLSearchParams,
    res: ServerResponse,
    /** Set when the watch asked for Table events (`kubectl get -w`). */
    asTable?: (objects: StoredObject[]) => JsonObject,
  ): void {
    const selector = parseLabelSelector(query.get('labelSelector') ?? undefined);
    const fields = parseFieldSelector(route.resource, query.get('fieldSelector'));
    const requested = query.get('resourceVersion');
    const selected = (object: StoredObject): boolean =>
      matchesLabels(object, selector) && matchesFields(route.resource, object, fields);
    // As the API server filters a watch: an object that comes to match is ADDED to it, one that
    // stops matching is DELETED from it.
    const seenAs = (event: WatchEvent): WatchEvent['type'] | undefined => {
      if (event.resource !== route.resource) return undefined;
      if (route.namespace !== undefined && event.namespace !== route.namespace) return undefined;
      const now = selected(event.object);
      if (event.type !== 'MODIFIED' || event.previous === undefined) {
        return now ? event.type : undefined;
      }
      const before = selected(event.previous);
      if (before && now) return 'MODIFIED';
      if (before) return 'DELETED';
      return now ? 'ADDED' : undefined;
    };
    let columnsSent = false;
    const write = (payload: JsonObject): void => {
      if (res.writableEnded) return;
      let sent = payload;
      if (asTable !== undefined && payload.type !== 'ERROR' && payload.type !== 'BOOKMARK') {
        const table = asTable([payload.object as StoredObject]);
        // The header once: kubectl prints each event's row under the first one's columns.
        if (columnsSent) table.columnDefinitions = [];
        columnsSent = true;
        sent = { ...payload, object: table };
      }
      res.write(`${JSON.stringify(sent)}\n`);
    };
    let fromRevision: number;
    const initial: StoredObject[] = [];
    if (requested === null || requested === '' || requested === '0') {
      // Unset and "0" both start with synthetic ADDED events for the current objects.
      initial.push(
        ...this.store
          .list(route.resource, {
            namespace: route.namespace,
            labelSelector: query.get('labelSelector') ?? undefined,
          })
          .filter((item) => matchesFields(route.resource, item, fields)),
      );
      fromRevision = this.store.currentRevision;
    } else {
      fromRevision = Number(requested);
      if (!Number.isInteger(fromRevision)) {
        throw new KubeApiError(400, 'BadRequest', `invalid resourceVersion: ${requested}`);
      }
    }
    if (fromRevision < this.store.oldestWatchableRevision && this.options.goneAsHttpStatus) {
      throw new KubeApiError(410, 'Expired', `too old resource version: ${fromRevision}`);
    }
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
    res.flushHeaders();
    this.watches.add(res);
    for (const object of initial) write({ type: 'ADDED', object });
    let unsubscribe = (): void => undefined;
    try {
      unsubscribe = this.store.subscribe(fromRevision, (event) => {
        const type = seenAs(event);
        if (type !== undefined) write({ type, object: event.object });
      });
    } catch (error) {
      if (!(error instanceof KubeApiError)) throw error;
      write({ type: 'ERROR', object: statusBody(error) });
      this.watches.delete(res);
      res.end();
      return;
    }
    const timers: NodeJS.Timeout[] = [];
    const sendBookmark = (): void =>
      write({
        type: 'BOOKMARK',
        object: {
          apiVersion: apiVersionOf(route.resource),
          kind: resources[route.resource].kind,
          metadata: { resourceVersion: String(this.store.currentRevision) },
        },
      });
    if (query.get('allowWatchBookmarks') === 'true') {
      this.bookmarkers.add(sendBookmark);
      timers.push(setInterval(sendBookmark, this.options.bookmarkIntervalMs ?? 1000));
    }
    const timeoutSeconds = Number(query.get('timeoutSeconds') ?? '0');
    if (timeoutSeconds > 0) timers.push(setTimeout(() => res.end(), timeoutSeconds * 1000));
    const release = (): void => {
      unsubscribe();
      timers.forEach(clearTimeout);
      this.bookmarkers.delete(sendBookmark);
      this.watches.delete(res);
    };
    res.on('close', release);
    res.on('finish', release);
  }

  private get adminToken(): string {
    return this.options.token ?? 'fake-token';
  }

  private authorize(rbac: Authorizer, user: UserInfo, method: string, url: URL): void {
    const request = requestAttributes(method, url.pathname, url.searchParams);
    const decision = rbac.authorize(user, request);
    if (decision.allowed) return;
    this.denials.push({ user: user.name, method, request, message: decision.message });
    let details: JsonObject | undefined;
    if (request.isResourceRequest) {
      details = {
        ...(request.name === '' ? {} : { name: request.name }),
        ...(request.apiGroup === '' ? {} : { group: request.apiGroup }),
        kind: request.resource,
      };
    }
    throw new KubeApiError(403, 'Forbidden', decision.message, details);
  }

  private injectFailure(method: string, path: string): void {
    const failure = this.failures.find(
      (f) =>
        f.remaining > 0 &&
        (f.match.method === undefined || f.match.method === method) &&
        (f.match.path === undefined || f.match.path.test(path)),
    );
    if (failure === undefined) return;
    failure.remaining -= 1;
    this.failures = this.failures.filter((f) => f.remaining > 0);
    const reason = failure.status === 429 ? 'TooManyRequests' : 'InternalError';
    throw new KubeApiError(failure.status, reason, `injected failure (${failure.status})`);
  }
}

function parseRoute(path: string): Route {
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  // Core kinds under /api/v1, a group's under /apis/<group>/v1.
  const group = parts[0] === 'apis' ? parts[1] : undefined;
  const version = group === undefined ? parts[1] : parts[2];
  if ((parts[0] !== 'api' && group === undefined) || version !== 'v1') {
    throw new KubeApiError(
      404,
      'NotFound',
      `the server could not find the requested resource (${path})`,
    );
  }
  let rest = parts.slice(group === undefined ? 2 : 3);
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [resource, name, subresource, ...extra] = rest;
  if (resource === undefined || !(resource in resources) || extra.length > 0) {
    throw new KubeApiError(
      404,
      'NotFound',
      `the server could not find the requested resource (${path})`,
    );
  }
  const kind = resources[resource as ResourceName];
  if (kind.group !== group) {
    throw new KubeApiError(
      404,
      'NotFound',
      `the server could not find the requested resource (${path})`,
    );
  }
  if (subresource !== undefined && (subresource !== 'status' || !kind.hasStatusSubresource)) {
    throw new KubeApiError(
      404,
      'NotFound',
      `the server could not find the requested resource (${path})`,
    );
  }
  if (kind.namespaced && name !== undefined && namespace === undefined) {
    throw new KubeApiError(
      404,
      'NotFound',
      `the server could not find the requested resource (${path})`,
    );
  }
  if (!kind.namespaced && namespace !== undefined) {
    throw new KubeApiError(404, 'NotFound', `${resource} are not namespaced`);
  }
  return { resource: resource as ResourceName, namespace, name, subresource };
}

/** A request body: JSON, or (for the kinds protobuf.ts reads) Kubernetes' protobuf encoding. */
async function readBody(
  req: IncomingMessage,
  /** The kind a protobuf body must hold; none for DeleteOptions, which is read only as JSON. */
  resource: ResourceName | undefined,
): Promise<Json> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const bytes = Buffer.concat(chunks);
  const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim();
  if (contentType === 'application/vnd.kubernetes.protobuf' && bytes.length > 0) {
    // A protobuf DeleteOptions (dryRun, preconditions) is not read: refused, never ignored.
    if (resource === undefined) {
      throw new KubeApiError(
        415,
        'UnsupportedMediaType',
        'DeleteOptions are read as application/json only',
      );
    }
    return decodeProtobufBody(resource, bytes);
  }
  const text = bytes.toString('utf8');
  if (text.trim() === '') return null;
  try {
    return JSON.parse(text) as Json;
  } catch {
    // A server-side apply body is YAML (kubectl sends JSON, which is YAML too).
    if (contentType === 'application/apply-patch+yaml') {
      try {
        return loadYaml<Json>(text);
      } catch (error) {
        throw new KubeApiError(
          400,
          'BadRequest',
          `the apply body is not valid YAML: ${String(error)}`,
        );
      }
    }
    throw new KubeApiError(400, 'BadRequest', 'the request body is not valid JSON');
  }
}

/** As the API server names a writer that gave no fieldManager: its user agent's first word. */
function managerOf(userAgent: string | undefined): string {
  const name = (userAgent ?? '').split('/')[0]?.trim() ?? '';
  return name === '' ? 'unknown' : name;
}

function decodeContinue(token: string): { snapshot: string; offset: number } | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    if (
      isJsonObject(value) &&
      typeof value.snapshot === 'string' &&
      typeof value.offset === 'number'
    ) {
      return { snapshot: value.snapshot, offset: value.offset };
    }
  } catch {
    // fall through: an unreadable token is treated as expired
  }
  return undefined;
}

function statusBody(error: KubeApiError): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Status',
    metadata: {},
    status: 'Failure',
    message: error.message,
    reason: error.reason,
    ...(error.details === undefined ? {} : { details: error.details }),
    code: error.code,
  };
}

function bearerToken(req: IncomingMessage): string | undefined {
  const match = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
  return match?.[1];
}

function sameGroups(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n');
}

function successStatus(resource: ResourceName, name: string): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Status',
    metadata: {},
    status: 'Success',
    details: { name, kind: resource },
  };
}

function sendJson(res: ServerResponse, status: number, body: Json): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** The API groups served besides core/v1, each at version v1. */
const groups = [
  ...new Set(Object.values(resources).flatMap((kind) => (kind.group ? [kind.group] : []))),
];

/**
 * API discovery, so kubectl can map `services`, `svc`, `nodes`, `events`, `namespaces` and
 * `endpointslices` to their paths: core/v1, and each group at v1.
 */
function discoveryDocument(path: string): Json | undefined {
  const trimmed = path.replace(/\/$/, '');
  switch (trimmed) {
    case '/api':
      return {
        kind: 'APIVersions',
        versions: ['v1'],
        serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1' }],
      };
    case '/apis':
      return {
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: groups.map((name) => groupDocument(name)),
      };
    case '/api/v1':
      return resourceList(undefined);
    default: {
      const group = groups.find((name) => trimmed === `/apis/${name}`);
      if (group !== undefined)
        return { kind: 'APIGroup', apiVersion: 'v1', ...groupDocument(group) };
      const versioned = groups.find((name) => trimmed === `/apis/${name}/v1`);
      return versioned === undefined ? undefined : resourceList(versioned);
    }
  }
}

function groupDocument(name: string): JsonObject {
  const version = { groupVersion: `${name}/v1`, version: 'v1' };
  return { name, versions: [version], preferredVersion: version };
}

function resourceList(group: string | undefined): JsonObject {
  const verbs = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];
  const served = Object.entries(resources).filter(([, resource]) => resource.group === group);
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: group === undefined ? 'v1' : `${group}/v1`,
    resources: [
      ...served.map(([name, resource]) => ({
        name,
        singularName: resource.kind.toLowerCase(),
        namespaced: resource.namespaced,
        kind: resource.kind,
        verbs,
        ...(name === 'services' ? { shortNames: ['svc'] } : {}),
        ...(name === 'nodes' ? { shortNames: ['no'] } : {}),
        ...(name === 'events' ? { shortNames: ['ev'] } : {}),
        ...(name === 'namespaces' ? { shortNames: ['ns'] } : {}),
      })),
      ...served
        .filter(([, resource]) => resource.hasStatusSubresource)
        .map(([name, resource]) => ({
          name: `${name}/status`,
          singularName: '',
          namespaced: resource.namespaced,
          kind: resource.kind,
          verbs: ['get', 'patch', 'update'],
        })),
    ],
  };
}

function object(value: Json | undefined): JsonObject {
  return isJsonObject(value) ? value : {};
}

/**
 * How a write runs: for real, or with `dryRun=All` checked and answered but kept nowhere (what
 * `kubectl … --dry-run=server` and `kubectl diff` send). The only other value the API server
 * knows is none at all.
 */
function writeMode(
  method: string,
  query: URLSearchParams,
  deleteOptions: Json,
  store: { dryRun<T>(write: () => T): T },
): <T>(write: () => T) => T {
  const inBody = object(deleteOptions).dryRun;
  const dryRun = [
    ...query.getAll('dryRun'),
    ...(Array.isArray(inBody)
      ? inBody.map((value) => JSON.stringify(value).replace(/^"|"$/g, ''))
      : []),
  ];
  if (dryRun.length === 0 || method === 'GET') return (write) => write();
  if (dryRun.some((value) => value !== 'All')) {
    throw new KubeApiError(
      400,
      'BadRequest',
      `dryRun: Unsupported value: ${JSON.stringify(dryRun.join(','))}: supported values: "All"`,
    );
  }
  return (write) => store.dryRun(write);
}

/** DeleteOptions' preconditions: the object must still be the one the caller saw. */
function checkPreconditions(current: StoredObject, deleteOptions: Json): void {
  const preconditions = object(object(deleteOptions).preconditions);
  for (const field of ['uid', 'resourceVersion'] as const) {
    const expected = preconditions[field];
    const actual = current.metadata[field];
    if (typeof expected === 'string' && expected !== actual) {
      throw new KubeApiError(
        409,
        'Conflict',
        `Precondition failed: ${field === 'uid' ? 'UID' : 'ResourceVersion'} in precondition: ${expected}, ${field === 'uid' ? 'UID' : 'ResourceVersion'} in object meta: ${typeof actual === 'string' ? actual : ''}`,
      );
    }
  }
}

/**
 * `fieldValidation` as the API server applies it to a body: Strict refuses fields the kind's
 * schema does not know (kubectl sends Strict once the OpenAPI document says the server checks),
 * Warn (the default) drops them with a Warning header each, Ignore drops them silently.
 */
function checkFields(
  resource: ResourceName,
  body: Json,
  query: URLSearchParams,
  res: ServerResponse,
): Json {
  const mode = query.get('fieldValidation') ?? 'Warn';
  if (mode !== 'Strict' && mode !== 'Warn' && mode !== 'Ignore') {
    throw new KubeApiError(
      400,
      'BadRequest',
      `fieldValidation: Unsupported value: ${JSON.stringify(mode)}: supported values: "Ignore", "Strict", "Warn"`,
    );
  }
  const unknown = unknownFields(resource, body).map((path) => path.slice(1));
  if (unknown.length === 0) return body;
  const kind = resources[resource].kind;
  if (mode === 'Strict') {
    throw new KubeApiError(
      400,
      'BadRequest',
      `${kind} in version "v1" cannot be handled as a ${kind}: strict decoding error: ${unknown
        .map((field) => `unknown field ${JSON.stringify(field)}`)
        .join(', ')}`,
    );
  }
  if (mode === 'Warn') {
    res.setHeader(
      'Warning',
      unknown.map((field) => `299 - ${JSON.stringify(`unknown field ${JSON.stringify(field)}`)}`),
    );
  }
  return withoutFields(
    body,
    unknown.map((field) => `.${field}`),
  );
}
