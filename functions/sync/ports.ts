/**
 * The ports the use cases are written against. Adapters (functions/aws, functions/kube) implement
 * them for AWS and Kubernetes; test/support has in-memory versions that record every call.
 */
import type { EndpointSliceView } from '../core/endpoint-targets';
import type { ControllerEvent } from '../core/events';
import type { JsonValue } from '../core/hash';
import type { Host } from '../core/hosts';
import type { ServiceKey } from '../core/keys';
import type { EligibleHosts, ServiceHostsState } from '../core/node-sync-plan';
import type {
  LoadBalancerIngress,
  LoadBalancerStatus,
  Node,
  ObjectMeta,
  ObjectReference,
  Service,
  ServiceSpec,
} from '../core/objects';

/** What the provider keeps between calls (ARNs and the like): opaque to the core, stored as JSON. */
export type ProviderState = { readonly [key: string]: JsonValue | undefined };

/**
 * A provider error may carry the state reached before it failed (`providerState`), so resources
 * created by a half-finished call are recorded, not only findable by tags later.
 */
/**
 * Whether a provider's pass ended before it asked AWS to change anything (a budget deferral
 * while it read): the provider sets `awsUnchanged` on that error, so the use case need not write
 * the record again (issue 37: a deferred pass costs a write less).
 */
export function awsUnchanged(error: unknown): boolean {
  return typeof error === 'object' && error !== null && 'awsUnchanged' in error
    ? error.awsUnchanged === true
    : false;
}

export function providerStateOf(error: unknown): ProviderState | undefined {
  if (typeof error !== 'object' || error === null || !('providerState' in error)) return undefined;
  const state = error.providerState;
  return typeof state === 'object' && state !== null ? (state as ProviderState) : undefined;
}

/**
 * Whether a delete failed because deletion protection keeps the load balancer: the provider sets
 * `keptByDeletionProtection` on that error, so the use case can count the NLB as kept.
 */
export function keptByDeletionProtection(error: unknown): boolean {
  return (
    typeof error === 'object' &&
    error !== null &&
    'keptByDeletionProtection' in error &&
    error.keptByDeletionProtection === true
  );
}

/** What a load balancer looks like to the systems around the cluster (DNS, firewalls, chat). */
export interface LoadBalancerSummary {
  readonly loadBalancerId: string;
  readonly dnsName: string;
  readonly scheme: 'internal' | 'internet-facing';
  readonly listeners: readonly {
    readonly port: number;
    readonly protocol: string;
    readonly targetGroupId: string;
  }[];
  readonly securityGroupId?: string | undefined;
  /**
   * A hash of everything the provider manages except the targets: when it equals the one last
   * announced, the load balancer has not changed shape.
   */
  readonly shape: string;
}

/** Instances that became targets, or stopped being targets, of the load balancer. */
export interface TargetChanges {
  readonly added: readonly string[];
  readonly removed: readonly string[];
}

export interface EnsureResult {
  readonly status: LoadBalancerStatus;
  readonly state: ProviderState;
  /** Come back after this many seconds (e.g. the NLB is still provisioning); no backoff growth. */
  readonly requeueAfterSeconds?: number | undefined;
  /** Why, in words for the log; the NLB still provisioning when not given. */
  readonly requeueReason?: string | undefined;
  readonly summary: LoadBalancerSummary;
  /** The instances registered afterwards, across all target groups, sorted. */
  readonly instances: readonly string[];
  /** What this call changed, one entry per change; empty when AWS already matched. */
  readonly changes: readonly string[];
}

export interface EnsureOptions {
  /**
   * Called once, before the first change to AWS, and only when there is one: a drift check that
   * finds nothing to repair then writes nothing anywhere.
   */
  readonly beforeChanges?: () => Promise<void>;
  /**
   * The Service's EndpointSlices, read by the sync when the provider's targets are pods
   * (`targetsFromEndpoints`); absent otherwise.
   */
  readonly endpointSlices?: readonly EndpointSliceView[] | undefined;
}

export interface UpdateResult {
  readonly state: ProviderState;
  /** The instances registered afterwards, across all target groups, sorted. */
  readonly instances: readonly string[];
  /** Present when the update had to be a full Ensure (the targets were not all recorded). */
  readonly summary?: LoadBalancerSummary | undefined;
}

export interface DeleteResult {
  readonly state: ProviderState;
  /** The load balancer deleted by this call or an earlier one, when it was known. */
  readonly loadBalancerId?: string | undefined;
  /**
   * Some resources could not be deleted yet (a security group in use for minutes after its NLB is
   * gone): come back after this many seconds; the finalizer stays until nothing is left.
   */
  readonly requeueAfterSeconds?: number | undefined;
}

/**
 * The cloud-provider LoadBalancer interface, extended: provider state goes in and comes back, and
 * "requeue after N s" can be signalled. Errors are thrown as core errors (RetryableError,
 * TerminalError, ...); anything else is treated as retryable.
 */
export interface LoadBalancerProvider {
  /** Part of every checkpoint: a change (configuration, model version) re-ensures every Service once. */
  readonly fingerprint: string;
  getLoadBalancerName(service: Service): string;
  /**
   * Whether anything we own for the Service still exists, found by stored state or ownership tags
   * (not only the NLB), and its status if the NLB exists.
   */
  getLoadBalancer(
    service: Service,
    state: ProviderState | undefined,
  ): Promise<{ readonly exists: boolean; readonly status?: LoadBalancerStatus | undefined }>;
  ensureLoadBalancer(
    service: Service,
    hosts: readonly Host[],
    state: ProviderState | undefined,
    options?: EnsureOptions,
  ): Promise<EnsureResult>;
  updateLoadBalancer(
    service: Service,
    hosts: readonly Host[],
    state: ProviderState | undefined,
    options?: UpdateOptions,
  ): Promise<UpdateResult>;
  /**
   * Whether the Service's targets are its pods (from its EndpointSlices) rather than its nodes:
   * then node changes do not concern it and endpoint changes do. Reads the Service alone; a
   * Service whose annotations cannot be read answers false (its Ensure reports them).
   */
  targetsFromEndpoints(service: Service): boolean;
  /**
   * Endpoint changes only: registers the pods that serve and deregisters the others, in the
   * recorded target groups. Throws NotFoundError when what is recorded does not fit the Service
   * (no target group of pods recorded for a port): a full Ensure sorts that out.
   */
  updateEndpointTargets(
    service: Service,
    slices: readonly EndpointSliceView[],
    state: ProviderState | undefined,
    options?: UpdateOptions,
  ): Promise<UpdateResult>;
  /** Deletes everything owned for the Service; must not stop early because the NLB is already gone. */
  ensureLoadBalancerDeleted(
    service: Service,
    state: ProviderState | undefined,
  ): Promise<DeleteResult>;
}

export interface UpdateOptions {
  /**
   * Read what each target group has registered from AWS instead of trusting the targets the
   * state records: after a failed pass or a takeover the record may not say what AWS has.
   */
  readonly readTargets?: boolean;
}

/** The Kubernetes API as the use cases need it. */
export interface KubernetesApi {
  /** The live Service, or undefined when it does not exist (404). */
  getService(namespace: string, name: string): Promise<Service | undefined>;
  /** Adds a finalizer, keeping every other one. */
  addFinalizer(service: Service, finalizer: string): Promise<void>;
  /** Removes one finalizer, keeping every other one. */
  removeFinalizer(service: Service, finalizer: string): Promise<void>;
  /** Writes status.loadBalancer through the status subresource; throws NotFoundError when the Service is gone. */
  patchServiceStatus(service: Service, status: LoadBalancerStatus): Promise<void>;
  listNodes(): Promise<Node[]>;
  /** The EndpointSlices of one Service (label `kubernetes.io/service-name`), every page. */
  listEndpointSlices(namespace: string, serviceName: string): Promise<EndpointSliceView[]>;
}

/**
 * What tenant-policy rules need to know about a namespace (functions/nlb/tenant-policy-check.ts);
 * read only when a policy asks for it.
 */
export interface NamespaceDirectory {
  /** The Namespace's labels; none when it is not found. */
  namespaceLabels(namespace: string): Promise<Readonly<Record<string, string>>>;
  /**
   * Every Service in the namespace (all pages, read in small pages one item at a time), each cut
   * down to a summary: a namespace may hold many Services of the API server's largest size.
   */
  listServices(namespace: string): Promise<ServiceSummary[]>;
}

/**
 * What a Service list keeps of each Service (`serviceSummary` in functions/kube): bounded whatever
 * the Service holds. A caller that needs another field adds it there, bounded too.
 */
export interface ServiceSummary extends Service {
  readonly metadata: Pick<
    ObjectMeta,
    | 'name'
    | 'namespace'
    | 'uid'
    | 'creationTimestamp'
    | 'deletionTimestamp'
    | 'finalizers'
    | 'annotations'
  >;
  readonly spec: Pick<ServiceSpec, 'type' | 'loadBalancerClass'>;
  readonly status?: {
    readonly loadBalancer?: {
      readonly ingress?: readonly Pick<LoadBalancerIngress, 'ip' | 'hostname'>[] | undefined;
    };
  };
}

/** Records Kubernetes Events (source component `service-controller`); never throws. */
export interface EventRecorder {
  record(object: ObjectReference, event: ControllerEvent): Promise<void>;
}

/**
 * The lifecycle feed (EventBridge): the use cases say what changed, the runtime adds the envelope
 * (cluster, correlation id) and publishes after the pass. Called only on changes; never throws.
 */
export interface LifecycleRecorder {
  /** The Service this pass is about, once read: a failure of the pass names its UID. */
  subject(service: Service): void;
  ensured(service: Service, summary: LoadBalancerSummary): void;
  hostsUpdated(service: Service, targets: TargetChanges): void;
  deleted(service: Service, loadBalancerId: string | undefined): void;
  nodeSetChanged(change: TargetChanges & { readonly eligibleHosts: number }): void;
}

/** The LB as last announced: its shape and ARN (LoadBalancerEnsured) and its instances. */
export interface Announced {
  /** Unknown for a record from before the feed existed: the next shape is taken silently. */
  readonly shape?: string | undefined;
  readonly loadBalancerId?: string | undefined;
  readonly instances: readonly string[];
}

/** What state keeps for one Service: the seed's serviceCache and more (docs/design.md §3). */
export interface ServiceRecord {
  readonly key: ServiceKey;
  readonly uid: string;
  /** Enough of the Service to delete its LB after it is gone; written before the first AWS change. */
  readonly snapshot: Service;
  readonly provider: ProviderState;
  /** Set after a successful Ensure, cleared before changing AWS. */
  readonly checkpoint?: string | undefined;
  /** The status the last Ensure returned. */
  readonly status?: LoadBalancerStatus | undefined;
  /** Hash of the hosts the LB last got. */
  readonly hostsHash?: string | undefined;
  /**
   * A digest of the EndpointSlices the LB's pod targets last came from (`endpointsDigest`);
   * undefined for node targets, or when the next targets sync must look at AWS.
   */
  readonly targetsHash?: string | undefined;
  /** The target-node-labels selector those hosts were chosen by (canonical); undefined: all. */
  readonly nodeSelector?: string | undefined;
  /** What the lifecycle feed was last told of this Service's LB (see sync/announce.ts). */
  readonly announced?: Announced | undefined;
  /**
   * The terminal Warning last emitted, and a fingerprint of the spec it was about (the checkpoint's
   * inputs less the hosts, so a node change does not make it new): the same spec is not warned
   * about again (S11), and a sweep does not re-run it.
   */
  readonly warned?: { readonly spec: string; readonly message: string } | undefined;
  /** Deletion has started (its Deleting event was emitted): later passes only finish it. */
  readonly deleting?: boolean | undefined;
  /** Deletion protection kept the load balancer, and it is marked on its namespace's kept list. */
  readonly kept?: boolean | undefined;
  readonly updatedAt: string;
}

/**
 * State that replaces the seed's in-memory serviceCache, knownHosts and servicesToUpdate. The
 * runtime keeps more on the same items (lease, failure count, dirty flag): an adapter must write
 * only the fields named here and leave the others alone.
 */
export interface StateStore {
  getService(key: ServiceKey): Promise<ServiceRecord | undefined>;
  putService(record: ServiceRecord): Promise<void>;
  /**
   * Throws the TerminalError `putService` would for a record that cannot be stored (too large),
   * without writing: a known Service's record is written only after AWS changed.
   */
  checkStorable(record: ServiceRecord): void;
  deleteService(key: ServiceKey): Promise<void>;
  /**
   * Adds the Service to (or takes it off) its namespace's list of load balancers kept by deletion
   * protection, which the tenant policy counts whatever becomes of the Service object.
   */
  markKept(key: ServiceKey, kept: boolean): Promise<void>;
  listServiceHosts(): Promise<ServiceHostsState[]>;
  getEligibleHosts(): Promise<EligibleHosts | undefined>;
  putEligibleHosts(hosts: EligibleHosts): Promise<void>;
}

export interface Clock {
  now(): Date;
}
