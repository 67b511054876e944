import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { KubeApiError } from './api-error';
import { matchesLabels, parseLabelSelector } from './label-selectors';
import { applyConfig, ApplyConflictError, recordUpdate } from './managed-fields';
import {
  applyJsonPatch,
  applyMergePatch,
  applyStrategicMergePatch,
  isJsonObject,
  PatchError,
  type Json,
  type JsonObject,
} from './patches';

export type ResourceName = 'services' | 'nodes' | 'events' | 'namespaces' | 'endpointslices';

interface ResourceKind {
  readonly kind: string;
  /** The API group (none: core/v1, under /api/v1); every group is served at version v1. */
  readonly group?: string;
  readonly namespaced: boolean;
  /** Writes to the main resource keep the stored status; only the status subresource changes it. */
  readonly hasStatusSubresource: boolean;
  /** Services start with an empty status; Nodes may register with theirs (as the kubelet does). */
  readonly keepsStatusOnCreate: boolean;
}

export const resources: Record<ResourceName, ResourceKind> = {
  services: {
    kind: 'Service',
    namespaced: true,
    hasStatusSubresource: true,
    keepsStatusOnCreate: false,
  },
  nodes: { kind: 'Node', namespaced: false, hasStatusSubresource: true, keepsStatusOnCreate: true },
  events: {
    kind: 'Event',
    namespaced: true,
    hasStatusSubresource: false,
    keepsStatusOnCreate: true,
  },
  // Read for their labels (tenant policy selectors); nothing here creates them implicitly.
  namespaces: {
    kind: 'Namespace',
    namespaced: false,
    hasStatusSubresource: false,
    keepsStatusOnCreate: true,
  },
  // Where ip-mode target groups find their pods (issue 36); the EndpointSlice controller's to write.
  endpointslices: {
    kind: 'EndpointSlice',
    group: 'discovery.k8s.io',
    namespaced: true,
    hasStatusSubresource: false,
    keepsStatusOnCreate: true,
  },
};

/** `v1`, or `<group>/v1` for a kind of an API group. */
export function apiVersionOf(resource: ResourceName): string {
  const group = resources[resource].group;
  return group === undefined ? 'v1' : `${group}/v1`;
}

export type PatchType = 'json' | 'merge' | 'strategic';

export interface StoredObject extends JsonObject {
  metadata: JsonObject;
}

export interface WatchEvent {
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly resource: ResourceName;
  readonly namespace: string;
  readonly resourceVersion: number;
  readonly object: StoredObject;
  /** For MODIFIED: the object before, so a watch with a selector sees it enter or leave. */
  readonly previous?: StoredObject;
}

export interface ListOptions {
  readonly namespace?: string | undefined;
  readonly labelSelector?: string | undefined;
}

type Listener = (event: WatchEvent) => void;

const nodePortRange = { first: 30000, last: 32767 };

/**
 * The state of the fake API server: objects, a monotonically increasing resourceVersion shared by
 * all kinds (as etcd's revision is), and the event history that watches resume from until it is
 * compacted.
 */
export class ObjectStore {
  private revision = 1000;
  private readonly objects = new Map<ResourceName, Map<string, StoredObject>>();
  private history: WatchEvent[] = [];
  private compactedRevision = 0;
  private readonly listeners = new Set<Listener>();
  private nextClusterIp = 1;
  private usedNodePorts = new Set<number>();
  /** Inside `dryRun`: writes are answered but neither kept nor heard by watches. */
  private dryRunning = false;

  get currentRevision(): number {
    return this.revision;
  }

  get oldestWatchableRevision(): number {
    return this.compactedRevision;
  }

  /** Forgets the history, so watches from any older resourceVersion get 410 Gone. */
  compact(): void {
    this.history = [];
    this.compactedRevision = this.revision;
  }

  list(resource: ResourceName, options: ListOptions = {}): StoredObject[] {
    const selector = parseLabelSelector(options.labelSelector);
    return [...this.table(resource).values()]
      .filter(
        (object) => options.namespace === undefined || namespaceOf(object) === options.namespace,
      )
      .filter((object) => matchesLabels(object, selector))
      .sort((a, b) => keyOf(a).localeCompare(keyOf(b)))
      .map((object) => structuredClone(object));
  }

  has(resource: ResourceName, namespace: string, name: string): boolean {
    const kind = resources[resource];
    return this.table(resource).has(storageKey(kind.namespaced ? namespace : '', name));
  }

  get(resource: ResourceName, namespace: string, name: string): StoredObject {
    return structuredClone(this.mustFind(resource, namespace, name));
  }

  /** `manager`: who writes (`fieldManager`), for managedFields; none leaves them as sent. */
  create(resource: ResourceName, namespace: string, body: Json, manager?: string): StoredObject {
    const kind = resources[resource];
    if (!isJsonObject(body) || !isJsonObject(body.metadata)) {
      throw new KubeApiError(
        400,
        'BadRequest',
        `${kind.kind} body must be an object with metadata`,
      );
    }
    const metadata: JsonObject = { ...body.metadata };
    if (typeof metadata.name !== 'string' || metadata.name === '') {
      if (typeof metadata.generateName !== 'string' || metadata.generateName === '') {
        throw new KubeApiError(
          422,
          'Invalid',
          `${kind.kind} "" is invalid: metadata.name: Required value: name or generateName is required`,
        );
      }
      metadata.name = metadata.generateName + randomUUID().slice(0, 5);
    }
    const name = metadata.name;
    const key = storageKey(kind.namespaced ? namespace : '', name);
    if (this.table(resource).has(key)) {
      throw new KubeApiError(409, 'AlreadyExists', `${resource} "${name}" already exists`);
    }
    const object: StoredObject = {
      ...structuredClone(body),
      apiVersion: apiVersionOf(resource),
      kind: kind.kind,
      metadata: {
        ...metadata,
        uid: randomUUID(),
        creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      },
    };
    if (kind.namespaced) object.metadata.namespace = namespace;
    else delete object.metadata.namespace;
    delete object.metadata.deletionTimestamp;
    if (!kind.keepsStatusOnCreate) object.status = {};
    if (resource === 'services') this.defaultService(object);
    // As the namespace controller leaves a new namespace: Active, with its finalizer.
    if (resource === 'namespaces') {
      object.spec = isJsonObject(object.spec) ? object.spec : {};
      object.spec.finalizers ??= ['kubernetes'];
      object.status = isJsonObject(object.status) ? object.status : {};
      object.status.phase ??= 'Active';
    }
    if (manager !== undefined) recordUpdate(undefined, object, manager, now(), body);
    return this.commit(resource, 'ADDED', object);
  }

  /** PUT: optimistic concurrency on metadata.resourceVersion when the body carries one. */
  update(
    resource: ResourceName,
    namespace: string,
    name: string,
    body: Json,
    subresource?: 'status',
    manager?: string,
  ): StoredObject {
    const current = this.mustFind(resource, namespace, name);
    if (!isJsonObject(body) || !isJsonObject(body.metadata)) {
      throw new KubeApiError(400, 'BadRequest', 'body must be an object with metadata');
    }
    const expected = body.metadata.resourceVersion;
    if (expected !== undefined && expected !== current.metadata.resourceVersion) {
      throw conflict(resource, name);
    }
    return this.write(resource, current, body as StoredObject, subresource, manager);
  }

  /**
   * Server-side apply (`application/apply-patch+yaml`): creates the object or merges the
   * manager's intent into it, with the ownership rules of managed-fields.ts.
   */
  apply(
    resource: ResourceName,
    namespace: string,
    name: string,
    config: Json,
    manager: string,
    force: boolean,
  ): StoredObject {
    if (!isJsonObject(config) || !isJsonObject(config.metadata)) {
      throw new KubeApiError(400, 'BadRequest', 'an apply body must be an object with metadata');
    }
    if (config.metadata.name !== undefined && config.metadata.name !== name) {
      throw new KubeApiError(
        400,
        'BadRequest',
        `the name of the object (${JSON.stringify(config.metadata.name)}) does not match the name in the URL (${name})`,
      );
    }
    const kind = resources[resource];
    const current = this.table(resource).get(storageKey(kind.namespaced ? namespace : '', name));
    let applied: StoredObject;
    try {
      applied = applyConfig(current, config, manager, force, now(), apiVersionOf(resource));
    } catch (error) {
      if (error instanceof ApplyConflictError) {
        throw new KubeApiError(409, 'Conflict', error.message, { kind: resource, name });
      }
      throw error;
    }
    if (current === undefined) {
      applied.metadata.name = name;
      return this.create(resource, namespace, applied);
    }
    return this.write(resource, current, applied, undefined);
  }

  patch(
    resource: ResourceName,
    namespace: string,
    name: string,
    type: PatchType,
    body: Json,
    subresource?: 'status',
    manager?: string,
  ): StoredObject {
    const current = this.mustFind(resource, namespace, name);
    let patched: Json;
    try {
      if (type === 'json') patched = applyJsonPatch(current, body);
      else if (type === 'merge') patched = applyMergePatch(current, body);
      else patched = applyStrategicMergePatch(current, body);
    } catch (error) {
      if (error instanceof PatchError) throw new KubeApiError(422, 'Invalid', error.message);
      throw error;
    }
    if (!isJsonObject(patched) || !isJsonObject(patched.metadata)) {
      throw new KubeApiError(422, 'Invalid', 'the patch removed metadata');
    }
    // A patch that names a resourceVersion is a precondition, as on a real API server.
    const precondition = patched.metadata.resourceVersion;
    if (precondition !== current.metadata.resourceVersion) throw conflict(resource, name);
    return this.write(resource, current, patched as StoredObject, subresource, manager);
  }

  /**
   * With finalizers left, deletion only sets deletionTimestamp; the object goes away when an
   * update removes the last finalizer.
   */
  delete(resource: ResourceName, namespace: string, name: string): StoredObject {
    const current = this.mustFind(resource, namespace, name);
    const finalizers = current.metadata.finalizers;
    if (Array.isArray(finalizers) && finalizers.length > 0) {
      if (current.metadata.deletionTimestamp !== undefined) return structuredClone(current);
      const marked = structuredClone(current);
      marked.metadata.deletionTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      marked.metadata.deletionGracePeriodSeconds = 0;
      return this.commit(resource, 'MODIFIED', marked);
    }
    return this.remove(resource, current);
  }

  /**
   * Runs a write as `dryRun=All` does: checked, defaulted and answered as it would be, but nothing
   * is kept, no resourceVersion is used up and no watch hears of it. Stored objects are replaced,
   * never changed in place, so copies of the tables are enough to put everything back.
   */
  dryRun<T>(write: () => T): T {
    const saved = {
      revision: this.revision,
      objects: new Map([...this.objects].map(([resource, table]) => [resource, new Map(table)])),
      nextClusterIp: this.nextClusterIp,
      usedNodePorts: new Set(this.usedNodePorts),
    };
    this.dryRunning = true;
    try {
      return write();
    } finally {
      this.dryRunning = false;
      this.revision = saved.revision;
      this.objects.clear();
      for (const [resource, table] of saved.objects) this.objects.set(resource, table);
      this.nextClusterIp = saved.nextClusterIp;
      this.usedNodePorts = saved.usedNodePorts;
    }
  }

  /**
   * Replays history after `fromRevision` to `listener`, then streams live events until the returned
   * function is called. Throws 410 Gone when that history has been compacted away.
   */
  subscribe(fromRevision: number, listener: Listener): () => void {
    if (fromRevision < this.compactedRevision) {
      throw new KubeApiError(
        410,
        'Expired',
        `too old resource version: ${fromRevision} (${this.compactedRevision})`,
      );
    }
    for (const event of this.history) {
      if (event.resourceVersion > fromRevision) listener(event);
    }
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private write(
    resource: ResourceName,
    current: StoredObject,
    proposed: StoredObject,
    subresource: 'status' | undefined,
    manager?: string,
  ): StoredObject {
    const kind = resources[resource];
    let next: StoredObject;
    if (subresource === 'status') {
      next = structuredClone(current);
      if (proposed.status === undefined) delete next.status;
      else next.status = structuredClone(proposed.status);
    } else {
      next = structuredClone(proposed);
      next.apiVersion = apiVersionOf(resource);
      next.kind = kind.kind;
      if (kind.hasStatusSubresource) {
        if (current.status === undefined) delete next.status;
        else next.status = structuredClone(current.status);
      }
      // Identity and lifecycle fields belong to the server.
      for (const field of ['name', 'namespace', 'uid', 'creationTimestamp', 'deletionTimestamp']) {
        const value = current.metadata[field];
        if (value === undefined) delete next.metadata[field];
        else next.metadata[field] = value;
      }
      if (current.metadata.deletionGracePeriodSeconds !== undefined) {
        next.metadata.deletionGracePeriodSeconds = current.metadata.deletionGracePeriodSeconds;
      }
      if (resource === 'services') this.defaultService(next);
    }
    next.metadata.resourceVersion = current.metadata.resourceVersion ?? null;
    // The server keeps managedFields: what a writer sends back of them (times turned into
    // Dates and back, say) is not a change.
    if (manager !== undefined && subresource === undefined) {
      if (current.metadata.managedFields === undefined) delete next.metadata.managedFields;
      else next.metadata.managedFields = structuredClone(current.metadata.managedFields);
    }
    // A write that changes nothing keeps the resourceVersion and sends no watch event.
    if (isDeepStrictEqual(next, current)) return structuredClone(current);
    if (manager !== undefined && subresource === undefined) {
      recordUpdate(current, next, manager, now());
    }
    const finalizers = next.metadata.finalizers;
    const noFinalizers = !Array.isArray(finalizers) || finalizers.length === 0;
    if (next.metadata.deletionTimestamp !== undefined && noFinalizers) {
      return this.remove(resource, next);
    }
    if (resource === 'services') this.releaseNodePorts(current, next);
    return this.commit(resource, 'MODIFIED', next);
  }

  private remove(resource: ResourceName, object: StoredObject): StoredObject {
    const removed = structuredClone(object);
    this.table(resource).delete(keyOf(object));
    if (resource === 'services') this.releaseNodePorts(object, undefined);
    return this.commit(resource, 'DELETED', removed);
  }

  private commit(
    resource: ResourceName,
    type: WatchEvent['type'],
    object: StoredObject,
  ): StoredObject {
    this.revision += 1;
    object.metadata.resourceVersion = String(this.revision);
    const previous = type === 'MODIFIED' ? this.table(resource).get(keyOf(object)) : undefined;
    if (type !== 'DELETED') this.table(resource).set(keyOf(object), object);
    const event: WatchEvent = {
      type,
      resource,
      namespace: namespaceOf(object),
      resourceVersion: this.revision,
      object: structuredClone(object),
      ...(previous ? { previous: structuredClone(previous) } : {}),
    };
    if (!this.dryRunning) {
      this.history.push(event);
      for (const listener of [...this.listeners]) listener(event);
    }
    return structuredClone(object);
  }

  private mustFind(resource: ResourceName, namespace: string, name: string): StoredObject {
    const kind = resources[resource];
    const object = this.table(resource).get(storageKey(kind.namespaced ? namespace : '', name));
    if (object === undefined) {
      throw new KubeApiError(404, 'NotFound', `${resource} "${name}" not found`);
    }
    return object;
  }

  private table(resource: ResourceName): Map<string, StoredObject> {
    let table = this.objects.get(resource);
    if (table === undefined) {
      table = new Map();
      this.objects.set(resource, table);
    }
    return table;
  }

  /** The defaults and allocations the API server applies to a Service, so clients see real shapes. */
  private defaultService(service: StoredObject): void {
    const spec: JsonObject = isJsonObject(service.spec) ? service.spec : {};
    service.spec = spec;
    spec.type ??= 'ClusterIP';
    spec.sessionAffinity ??= 'None';
    if (spec.type !== 'ExternalName') {
      if (spec.clusterIP === undefined) {
        const n = this.nextClusterIp++;
        spec.clusterIP = `10.96.${Math.floor(n / 250)}.${(n % 250) + 1}`;
      }
      spec.clusterIPs ??= [spec.clusterIP];
      spec.ipFamilies ??= ['IPv4'];
      spec.ipFamilyPolicy ??= 'SingleStack';
    }
    const external = spec.type === 'NodePort' || spec.type === 'LoadBalancer';
    if (external) spec.externalTrafficPolicy ??= 'Cluster';
    if (spec.type === 'LoadBalancer') spec.allocateLoadBalancerNodePorts ??= true;
    const wantsNodePorts =
      spec.type === 'NodePort' ||
      (spec.type === 'LoadBalancer' && spec.allocateLoadBalancerNodePorts !== false);
    const ports = Array.isArray(spec.ports) ? spec.ports : [];
    for (const port of ports) {
      if (!isJsonObject(port)) continue;
      port.protocol ??= 'TCP';
      port.targetPort ??= port.port ?? null;
      if (wantsNodePorts && port.nodePort === undefined) port.nodePort = this.allocateNodePort();
      else if (typeof port.nodePort === 'number') this.usedNodePorts.add(port.nodePort);
    }
    if (spec.type === 'LoadBalancer' && spec.externalTrafficPolicy === 'Local') {
      spec.healthCheckNodePort ??= this.allocateNodePort();
    }
  }

  private allocateNodePort(): number {
    for (let port = nodePortRange.first; port <= nodePortRange.last; port++) {
      if (!this.usedNodePorts.has(port)) {
        this.usedNodePorts.add(port);
        return port;
      }
    }
    throw new KubeApiError(500, 'InternalError', 'range of valid node ports is full');
  }

  private releaseNodePorts(before: StoredObject, after: StoredObject | undefined): void {
    const kept = new Set(nodePortsOf(after));
    for (const port of nodePortsOf(before)) if (!kept.has(port)) this.usedNodePorts.delete(port);
  }
}

function nodePortsOf(service: StoredObject | undefined): number[] {
  if (service === undefined || !isJsonObject(service.spec)) return [];
  const ports = Array.isArray(service.spec.ports) ? service.spec.ports : [];
  const result = ports.flatMap((port) =>
    isJsonObject(port) && typeof port.nodePort === 'number' ? [port.nodePort] : [],
  );
  if (typeof service.spec.healthCheckNodePort === 'number') {
    result.push(service.spec.healthCheckNodePort);
  }
  return result;
}

function conflict(resource: ResourceName, name: string): KubeApiError {
  return new KubeApiError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
  );
}

export function namespaceOf(object: StoredObject): string {
  return typeof object.metadata.namespace === 'string' ? object.metadata.namespace : '';
}

function keyOf(object: StoredObject): string {
  const name = object.metadata.name;
  return storageKey(namespaceOf(object), typeof name === 'string' ? name : '');
}

function storageKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** Timestamps as the API server writes them: RFC 3339 to the second. */
function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}
