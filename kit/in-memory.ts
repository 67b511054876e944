/**
 * In-memory implementations of the use-case ports. Every call is appended to one shared CallLog,
 * so tests can assert the order of calls across ports (finalizer before any cloud call, and so on).
 */
import type { ClaimPolicy } from '../functions/core/claim';
import type { EndpointSliceView } from '../functions/core/endpoint-targets';
import { NotFoundError, TerminalError } from '../functions/core/errors';
import type { ControllerEvent } from '../functions/core/events';
import { canonicalJson, stableHash } from '../functions/core/hash';
import type { Host } from '../functions/core/hosts';
import type { ServiceKey } from '../functions/core/keys';
import type { EligibleHosts, ServiceHostsState } from '../functions/core/node-sync-plan';
import type { NodePolicy } from '../functions/core/node-policy';
import type { LoadBalancerStatus, Node, ObjectReference, Service } from '../functions/core/objects';
import type { SyncDependencies } from '../functions/sync/dependencies';
import type {
  Clock,
  DeleteResult,
  EnsureOptions,
  EnsureResult,
  EventRecorder,
  KubernetesApi,
  LifecycleRecorder,
  LoadBalancerProvider,
  LoadBalancerSummary,
  ProviderState,
  ServiceRecord,
  StateStore,
  TargetChanges,
  UpdateOptions,
  UpdateResult,
} from '../functions/sync/ports';

export interface Call {
  readonly port: 'kube' | 'provider' | 'state' | 'events';
  readonly method: string;
  /** A short, readable description of the arguments: the key, finalizer, reason, ... */
  readonly detail: string;
}

export class CallLog {
  readonly calls: Call[] = [];

  add(port: Call['port'], method: string, detail = ''): void {
    this.calls.push({ port, method, detail });
  }

  /** `port.method detail` lines, optionally only of some ports. */
  lines(...ports: Call['port'][]): string[] {
    return this.calls
      .filter((c) => ports.length === 0 || ports.includes(c.port))
      .map((c) => `${c.port}.${c.method}${c.detail ? ` ${c.detail}` : ''}`);
  }

  indexOf(line: string): number {
    return this.lines().findIndex((l) => l === line || l.startsWith(`${line} `));
  }

  clear(): void {
    this.calls.length = 0;
  }
}

/** A queue of errors to throw from named methods, one per call. */
class FaultPlan {
  private readonly pending = new Map<string, unknown[]>();

  failNext(method: string, error: unknown, times = 1): void {
    const queue = this.pending.get(method) ?? [];
    for (let i = 0; i < times; i++) queue.push(error);
    this.pending.set(method, queue);
  }

  check(method: string): void {
    const queue = this.pending.get(method);
    if (queue !== undefined && queue.length > 0) throw queue.shift();
  }
}

function keyOf(namespace: string | undefined, name: string | undefined): string {
  return `${namespace ?? ''}/${name ?? ''}`;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

type MutableService = {
  metadata?: Record<string, unknown> & { finalizers?: string[] };
  spec?: unknown;
  status?: { loadBalancer?: LoadBalancerStatus };
};

/** A Kubernetes API holding Services and Nodes. Services handed out are deep-frozen copies (S13). */
export class InMemoryKubernetes implements KubernetesApi {
  private readonly services = new Map<string, Service>();
  nodes: Node[] = [];
  /** Each Service's EndpointSlices, by `namespace/name`. */
  readonly endpointSlices = new Map<string, EndpointSliceView[]>();
  readonly faults = new FaultPlan();
  /** Runs after getService returns, to change the world between read and write. */
  afterGet: (() => void) | undefined;

  constructor(private readonly log: CallLog) {}

  put(service: Service): void {
    this.services.set(
      keyOf(service.metadata?.namespace, service.metadata?.name),
      structuredClone(service),
    );
  }

  remove(namespace: string, name: string): void {
    this.services.delete(keyOf(namespace, name));
  }

  stored(namespace: string, name: string): Service | undefined {
    return this.services.get(keyOf(namespace, name));
  }

  getService(namespace: string, name: string): Promise<Service | undefined> {
    this.log.add('kube', 'getService', keyOf(namespace, name));
    this.faults.check('getService');
    const found = this.services.get(keyOf(namespace, name));
    const copy = found === undefined ? undefined : deepFreeze(structuredClone(found));
    this.afterGet?.();
    return Promise.resolve(copy);
  }

  addFinalizer(service: Service, finalizer: string): Promise<void> {
    return this.changeFinalizers('addFinalizer', service, finalizer, (list) =>
      list.includes(finalizer) ? list : [...list, finalizer],
    );
  }

  removeFinalizer(service: Service, finalizer: string): Promise<void> {
    return this.changeFinalizers('removeFinalizer', service, finalizer, (list) =>
      list.filter((f) => f !== finalizer),
    );
  }

  patchServiceStatus(service: Service, status: LoadBalancerStatus): Promise<void> {
    const key = keyOf(service.metadata?.namespace, service.metadata?.name);
    this.log.add('kube', 'patchServiceStatus', `${key} ${JSON.stringify(status)}`);
    this.faults.check('patchServiceStatus');
    const stored = this.services.get(key) as MutableService | undefined;
    if (stored === undefined)
      return Promise.reject(new NotFoundError(`services "${key}" not found`));
    stored.status = { ...(stored.status ?? {}), loadBalancer: structuredClone(status) };
    return Promise.resolve();
  }

  listNodes(): Promise<Node[]> {
    this.log.add('kube', 'listNodes');
    this.faults.check('listNodes');
    return Promise.resolve(structuredClone(this.nodes));
  }

  listEndpointSlices(namespace: string, serviceName: string): Promise<EndpointSliceView[]> {
    this.log.add('kube', 'listEndpointSlices', keyOf(namespace, serviceName));
    this.faults.check('listEndpointSlices');
    return Promise.resolve(
      structuredClone(this.endpointSlices.get(keyOf(namespace, serviceName)) ?? []),
    );
  }

  private changeFinalizers(
    method: string,
    service: Service,
    finalizer: string,
    change: (list: string[]) => string[],
  ): Promise<void> {
    const key = keyOf(service.metadata?.namespace, service.metadata?.name);
    this.log.add('kube', method, `${key} ${finalizer}`);
    this.faults.check(method);
    const stored = this.services.get(key) as MutableService | undefined;
    if (stored === undefined)
      return Promise.reject(new NotFoundError(`services "${key}" not found`));
    const metadata = (stored.metadata ??= {});
    const next = change([...(metadata.finalizers ?? [])]);
    const adds = next.some((f) => !(metadata.finalizers ?? []).includes(f));
    if (adds && metadata.deletionTimestamp !== undefined) {
      // As the API server does: no new finalizers once deletion has started.
      return Promise.reject(
        new Error(
          `services "${key}" is forbidden: no new finalizers can be added if the object is being deleted`,
        ),
      );
    }
    metadata.finalizers = next;
    if (metadata.finalizers.length === 0 && metadata.deletionTimestamp !== undefined) {
      this.services.delete(key);
    }
    return Promise.resolve();
  }
}

/** One fake NLB, keyed by the owning Service's UID as ownership tags would be. */
export interface FakeLoadBalancer {
  readonly name: string;
  readonly serviceKey: string;
  hosts: string[];
  /** Pod targets (`ip:port`), for a Service whose targets are pods. */
  pods?: string[];
  annotations: Record<string, string>;
  /** How many times a load balancer was created for this Service; a new one gets a new DNS name. */
  readonly generation?: number;
}

/** A cloud that records its calls and keeps fake load balancers. */
export class InMemoryLoadBalancerProvider implements LoadBalancerProvider {
  fingerprint = 'fake-provider-v1';
  readonly balancers = new Map<string, FakeLoadBalancer>();
  readonly faults = new FaultPlan();
  /** How many more delete calls report resources still in use (a security group, say). */
  deletesStillInUse = 0;
  /** Service UIDs whose leftovers (a security group still in use) remain after the NLB went. */
  readonly leftovers = new Set<string>();
  /** How many more ensure calls report the NLB as still provisioning. */
  ensuresProvisioning = 0;
  /** When set, ensure creates the LB and then throws this (a partial create). */
  failAfterCreate: Error | undefined;
  /** Load balancers created so far per Service UID (kept after deletion). */
  private readonly created = new Map<string, number>();

  constructor(private readonly log: CallLog) {}

  getLoadBalancerName(service: Service): string {
    return `k8s-${service.metadata?.namespace ?? ''}-${service.metadata?.name ?? ''}`.slice(0, 32);
  }

  getLoadBalancer(
    service: Service,
    _state: ProviderState | undefined,
  ): Promise<{ exists: boolean; status?: LoadBalancerStatus }> {
    this.log.add('provider', 'getLoadBalancer', this.describe(service));
    this.faults.check('getLoadBalancer');
    const uid = service.metadata?.uid ?? '';
    const lb = this.balancers.get(uid);
    if (lb === undefined) return Promise.resolve({ exists: this.leftovers.has(uid) });
    return Promise.resolve({ exists: true, status: statusOf(lb) });
  }

  async ensureLoadBalancer(
    service: Service,
    hosts: readonly Host[],
    _state: ProviderState | undefined,
    options: EnsureOptions = {},
  ): Promise<EnsureResult> {
    this.log.add(
      'provider',
      'ensureLoadBalancer',
      `${this.describe(service)} hosts=${hosts.map((h) => h.name).join(',')}`,
    );
    this.faults.check('ensureLoadBalancer');
    const uid = service.metadata?.uid ?? '';
    const existing = this.balancers.get(uid);
    const name = this.getLoadBalancerName(service);
    // A load balancer created again for the same Service gets a new DNS name, as in AWS.
    const generation = existing?.generation ?? (this.created.get(uid) ?? 0) + 1;
    const lb: FakeLoadBalancer = {
      name,
      serviceKey: keyOf(service.metadata?.namespace, service.metadata?.name),
      hosts: hosts.map((h) => h.instanceId),
      ...(options.endpointSlices !== undefined ? { pods: podTargets(options.endpointSlices) } : {}),
      annotations: { ...(service.metadata?.annotations ?? {}) },
      generation,
    };
    const changes =
      existing === undefined
        ? [`create load balancer ${name}`]
        : [
            ...(existing.hosts.join() !== lb.hosts.join() ||
            (existing.pods ?? []).join() !== (lb.pods ?? []).join()
              ? ['register targets']
              : []),
            ...(canonicalJson(existing.annotations) !== canonicalJson(lb.annotations)
              ? ['apply annotations']
              : []),
          ];
    if (changes.length > 0) await options.beforeChanges?.();
    this.created.set(uid, generation);
    this.balancers.set(uid, lb);
    if (this.failAfterCreate !== undefined) {
      const error = this.failAfterCreate;
      this.failAfterCreate = undefined;
      throw error;
    }
    const provisioning = this.ensuresProvisioning > 0;
    if (provisioning) this.ensuresProvisioning -= 1;
    const arn = arnOf(lb);
    return {
      status: statusOf(lb),
      state: { loadBalancerArn: arn },
      ...(provisioning ? { requeueAfterSeconds: 15 } : {}),
      summary: {
        loadBalancerId: arn,
        dnsName: statusOf(lb).ingress?.[0]?.hostname ?? '',
        scheme: 'internal',
        listeners: (service.spec?.ports ?? []).map((p) => ({
          port: p.port,
          protocol: p.protocol ?? 'TCP',
          targetGroupId: `${arn}/tg-${p.port}`,
        })),
        // Like the NLB provider's: what decides the LB, without its targets.
        shape: stableHash({
          arn,
          annotations: lb.annotations,
          ports: service.spec?.ports?.map((p) => p.port) ?? [],
        }),
      },
      instances: [...lb.hosts].sort(),
      changes,
    };
  }

  updateLoadBalancer(
    service: Service,
    hosts: readonly Host[],
    state: ProviderState | undefined,
    options: UpdateOptions = {},
  ): Promise<UpdateResult> {
    this.log.add(
      'provider',
      'updateLoadBalancer',
      `${this.describe(service)} hosts=${hosts.map((h) => h.name).join(',')}${options.readTargets === true ? ' reading targets' : ''}`,
    );
    this.faults.check('updateLoadBalancer');
    const lb = this.balancers.get(service.metadata?.uid ?? '');
    if (lb === undefined) return Promise.reject(new Error('LoadBalancerNotFound'));
    lb.hosts = hosts.map((h) => h.instanceId);
    return Promise.resolve({ state: state ?? {}, instances: [...lb.hosts].sort() });
  }

  targetsFromEndpoints(service: Service): boolean {
    return service.metadata?.annotations?.[nlbTargetTypeAnnotation] === 'ip';
  }

  updateEndpointTargets(
    service: Service,
    slices: readonly EndpointSliceView[],
    state: ProviderState | undefined,
    options: UpdateOptions = {},
  ): Promise<UpdateResult> {
    const pods = podTargets(slices);
    this.log.add(
      'provider',
      'updateEndpointTargets',
      `${this.describe(service)} pods=${pods.join(',')}${options.readTargets === true ? ' reading targets' : ''}`,
    );
    this.faults.check('updateEndpointTargets');
    const lb = this.balancers.get(service.metadata?.uid ?? '');
    if (lb === undefined) return Promise.reject(new NotFoundError('no target group of pods'));
    lb.pods = pods;
    return Promise.resolve({ state: state ?? {}, instances: [] });
  }

  ensureLoadBalancerDeleted(
    service: Service,
    state: ProviderState | undefined,
  ): Promise<DeleteResult> {
    this.log.add('provider', 'ensureLoadBalancerDeleted', this.describe(service));
    this.faults.check('ensureLoadBalancerDeleted');
    const uid = service.metadata?.uid ?? '';
    const existed = this.balancers.get(uid);
    this.balancers.delete(uid);
    if (this.deletesStillInUse > 0) {
      this.deletesStillInUse -= 1;
      this.leftovers.add(uid);
      return Promise.resolve({ state: state ?? {}, requeueAfterSeconds: 30 });
    }
    this.leftovers.delete(uid);
    return Promise.resolve({
      state: {},
      ...(existed ? { loadBalancerId: arnOf(existed) } : {}),
    });
  }

  private describe(service: Service): string {
    return `${keyOf(service.metadata?.namespace, service.metadata?.name)} uid=${service.metadata?.uid ?? ''}`;
  }
}

const nlbTargetTypeAnnotation = 'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type';

/** The fake's pod targets: every serving pod of every slice, on its first port. */
function podTargets(slices: readonly EndpointSliceView[]): string[] {
  const targets = slices.flatMap((slice) =>
    slice.endpoints
      .filter((e) => e.targetRef?.kind === 'Pod' && e.conditions?.ready !== false)
      .map((e) => `${e.addresses[0] ?? ''}:${slice.ports?.[0]?.port ?? 0}`),
  );
  return [...new Set(targets)].sort();
}

function arnOf(lb: FakeLoadBalancer): string {
  return `arn:fake:${lb.name}${(lb.generation ?? 1) > 1 ? `:${lb.generation}` : ''}`;
}

function statusOf(lb: FakeLoadBalancer): LoadBalancerStatus {
  const suffix = (lb.generation ?? 1) > 1 ? `-${lb.generation}` : '';
  return { ingress: [{ hostname: `${lb.name}${suffix}.elb.us-east-1.amazonaws.com` }] };
}

export class InMemoryStateStore implements StateStore {
  readonly records = new Map<ServiceKey, ServiceRecord>();
  eligibleHosts: EligibleHosts | undefined;
  readonly faults = new FaultPlan();

  constructor(private readonly log: CallLog) {}

  getService(key: ServiceKey): Promise<ServiceRecord | undefined> {
    this.log.add('state', 'getService', key);
    this.faults.check('getService');
    const record = this.records.get(key);
    return Promise.resolve(record === undefined ? undefined : structuredClone(record));
  }

  /** Records whose JSON is longer are refused as too large (DynamoStateStore compresses and measures). */
  maxRecordJsonBytes = Number.POSITIVE_INFINITY;

  checkStorable(record: ServiceRecord): void {
    const bytes = Buffer.byteLength(JSON.stringify(record));
    if (bytes > this.maxRecordJsonBytes) {
      throw new TerminalError(`the Service's state record would be ${bytes} bytes, over the limit`);
    }
  }

  putService(record: ServiceRecord): Promise<void> {
    this.checkStorable(record);
    this.log.add(
      'state',
      'putService',
      `${record.key} checkpoint=${record.checkpoint === undefined ? 'none' : 'set'}`,
    );
    this.faults.check('putService');
    // Stored as JSON, as DynamoDB would: anything not serialisable fails here.
    this.records.set(record.key, JSON.parse(JSON.stringify(record)) as ServiceRecord);
    return Promise.resolve();
  }

  deleteService(key: ServiceKey): Promise<void> {
    this.log.add('state', 'deleteService', key);
    this.faults.check('deleteService');
    this.records.delete(key);
    return Promise.resolve();
  }

  /** Namespace → the keys of its load balancers kept by deletion protection. */
  readonly kept = new Map<string, Set<ServiceKey>>();

  markKept(key: ServiceKey, kept: boolean): Promise<void> {
    this.log.add('state', 'markKept', `${key} ${kept}`);
    const namespace = key.slice(0, key.indexOf('/'));
    const keys = this.kept.get(namespace) ?? new Set<ServiceKey>();
    if (kept) keys.add(key);
    else keys.delete(key);
    this.kept.set(namespace, keys);
    return Promise.resolve();
  }

  listServiceHosts(): Promise<ServiceHostsState[]> {
    this.log.add('state', 'listServiceHosts');
    return Promise.resolve(
      [...this.records.values()].map((r) => ({
        key: r.key,
        hostsHash: r.hostsHash,
        nodeSelector: r.nodeSelector,
      })),
    );
  }

  getEligibleHosts(): Promise<EligibleHosts | undefined> {
    this.log.add('state', 'getEligibleHosts');
    return Promise.resolve(
      this.eligibleHosts === undefined ? undefined : structuredClone(this.eligibleHosts),
    );
  }

  putEligibleHosts(hosts: EligibleHosts): Promise<void> {
    this.log.add('state', 'putEligibleHosts', `${hosts.hosts.length} hosts`);
    this.eligibleHosts = structuredClone(hosts);
    return Promise.resolve();
  }
}

export interface RecordedEvent extends ControllerEvent {
  readonly object: ObjectReference;
}

export class RecordingEventRecorder implements EventRecorder {
  readonly events: RecordedEvent[] = [];

  constructor(private readonly log: CallLog) {}

  record(object: ObjectReference, event: ControllerEvent): Promise<void> {
    this.log.add('events', 'record', `${event.type} ${event.reason}`);
    this.events.push({ object, ...event });
    return Promise.resolve();
  }

  /** `Type Reason` lines, for compact assertions. */
  reasons(): string[] {
    return this.events.map((e) => `${e.type} ${e.reason}`);
  }
}

/** What the use cases told the lifecycle feed, as `Type namespace/name` lines plus the details. */
export class RecordingLifecycle implements LifecycleRecorder {
  readonly facts: { type: string; key: string; detail: unknown }[] = [];
  readonly subjects: string[] = [];

  subject(service: Service): void {
    const key = keyOf(service.metadata?.namespace, service.metadata?.name);
    this.subjects.push(`${key} ${service.metadata?.uid ?? ''}`);
  }
  ensured(service: Service, summary: LoadBalancerSummary): void {
    this.add('Ensured', service, summary);
  }
  hostsUpdated(service: Service, targets: TargetChanges): void {
    this.add('HostsUpdated', service, targets);
  }
  deleted(service: Service, loadBalancerId: string | undefined): void {
    this.add('Deleted', service, { loadBalancerId });
  }
  nodeSetChanged(change: TargetChanges & { eligibleHosts: number }): void {
    this.facts.push({ type: 'NodeSetChanged', key: '', detail: change });
  }

  /** `Type ns/name` lines, for compact assertions. */
  lines(): string[] {
    return this.facts.map((f) => (f.key === '' ? f.type : `${f.type} ${f.key}`));
  }

  private add(type: string, service: Service, detail: unknown): void {
    this.facts.push({
      type,
      key: keyOf(service.metadata?.namespace, service.metadata?.name),
      detail,
    });
  }
}

export class FixedClock implements Clock {
  constructor(public current = new Date('2026-11-30T12:00:00Z')) {}

  now(): Date {
    return new Date(this.current);
  }
}

/** A complete set of in-memory dependencies sharing one call log. */
export function inMemoryWorld(options: { claim: ClaimPolicy; nodePolicy?: NodePolicy }) {
  const log = new CallLog();
  const kube = new InMemoryKubernetes(log);
  const provider = new InMemoryLoadBalancerProvider(log);
  const state = new InMemoryStateStore(log);
  const events = new RecordingEventRecorder(log);
  const lifecycle = new RecordingLifecycle();
  const clock = new FixedClock();
  const deps: SyncDependencies = {
    kube,
    provider,
    state,
    events,
    lifecycle,
    clock,
    claim: options.claim,
    nodePolicy: options.nodePolicy ?? 'stable',
  };
  return { log, kube, provider, state, events, lifecycle, clock, deps };
}
