import { createHash } from 'node:crypto';
import { ourFinalizersOn, wantsLoadBalancer, type ClaimPolicy } from '../core/claim';
import { sliceProjection, type SliceEndpoint, type SlicePort } from '../core/endpoint-targets';
import { canonicalJson } from '../core/hash';
import type { Service } from '../core/objects';
import type { FingerprintStore } from './resource-watch';

/**
 * The EndpointSlices the forwarder watches (issue 36): those of Services whose NLB targets pods.
 * The label selector keeps slices that name no Service off the wire; it rides in the path
 * because a list page (kube/list-stream.ts) takes no query of its own, and the client keeps a
 * path's query when it adds the list's or the watch's.
 */
export const endpointSlicesPath = `/apis/discovery.k8s.io/v1/endpointslices?labelSelector=${encodeURIComponent(
  'kubernetes.io/service-name',
)}`;

/** The label the EndpointSlice controller puts on each slice: the name of its Service. */
export const serviceNameLabel = 'kubernetes.io/service-name';
export const nlbTargetTypeAnnotation =
  'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type';
/** Its legacy spelling, `nlb-ip`, asks for pod targets too (nlb/model reads both). */
export const loadBalancerTypeAnnotation = 'service.beta.kubernetes.io/aws-load-balancer-type';

/**
 * Whether the Service asks for pod targets, by the provider's rule (nlb-provider.ts
 * `targetsFromEndpoints`): `nlb-target-type: ip` or the legacy `type: nlb-ip`, those two
 * annotations alone, so the forwarder follows the endpoints of every Service the targets sync
 * serves. A Service's fingerprint keeps the answer as a target type of `ip`, so this reads a
 * fingerprint as it reads the Service.
 */
export function asksForIpTargets(service: Service): boolean {
  const annotations = service.metadata?.annotations ?? {};
  return (
    annotations[nlbTargetTypeAnnotation] === 'ip' ||
    annotations[loadBalancerTypeAnnotation] === 'nlb-ip'
  );
}

/**
 * A Service whose endpoint changes are work: it asks for pod targets and wants a load balancer
 * from us, or still carries our finalizer (a targets message then reaches the full sync, which
 * cleans up). Every Service that enters this state is sent as a `service` message too (S1, S2),
 * and that full sync reads its slices: the slice fingerprints only have to catch what follows.
 */
export function inIpMode(service: Service, claim: ClaimPolicy): boolean {
  return (
    (wantsLoadBalancer(service, claim) || ourFinalizersOn(service, claim).length > 0) &&
    asksForIpTargets(service)
  );
}

/** What the forwarder reads of an EndpointSlice as the API sends it (`endpoints` may be null). */
export interface EndpointSliceObject {
  readonly metadata?:
    | {
        readonly name?: string;
        readonly namespace?: string;
        readonly resourceVersion?: string;
        readonly labels?: Readonly<Record<string, string>>;
      }
    | undefined;
  readonly addressType?: string | undefined;
  readonly ports?: readonly SlicePort[] | null | undefined;
  readonly endpoints?:
    | readonly (Omit<SliceEndpoint, 'addresses'> & {
        readonly addresses?: readonly string[] | null | undefined;
      })[]
    | null
    | undefined;
}

/** `namespace/name` of the slice's Service, or undefined for a slice that names none. */
export function serviceKeyOfSlice(slice: EndpointSliceObject): string | undefined {
  const name = slice.metadata?.labels?.[serviceNameLabel];
  return name === undefined || name === ''
    ? undefined
    : `${slice.metadata?.namespace ?? ''}/${name}`;
}

/**
 * A digest of what of the slice can change a target group (the core's `sliceProjection`: address
 * type, ports, serving and terminating Pod endpoints), so labels, zones, hints, node names and
 * resourceVersions change nothing. SHA-256, as for Services: tenants write slices (a selector-less
 * Service's slices are theirs), and a weaker hash would let one hide a change.
 */
export function sliceDigest(slice: EndpointSliceObject): string {
  const projection = sliceProjection({
    namespace: slice.metadata?.namespace,
    addressType: slice.addressType ?? '',
    ports: slice.ports ?? [],
    endpoints: (slice.endpoints ?? []).map((endpoint) => ({
      addresses: endpoint.addresses ?? [],
      conditions: endpoint.conditions ?? undefined,
      targetRef: endpoint.targetRef ?? undefined,
    })),
  });
  // 128 bits: collisions would take 2^64 tries.
  return createHash('sha256').update(canonicalJson(projection)).digest('base64url').slice(0, 22);
}

/** What the forwarder keeps per slice of a Service in ip mode: whose it is, and its digest. */
export interface SliceFingerprint {
  readonly service: string;
  readonly digest: string;
}

/**
 * The Services whose targets a slice change may move: its Service when the digest changed, and
 * both when the slice was moved from one Service to another (only a hand-made slice can be).
 */
export function servicesToSync(
  old: SliceFingerprint | undefined,
  current: SliceFingerprint | undefined,
): string[] {
  if (old !== undefined && current !== undefined && old.service === current.service)
    return old.digest === current.digest ? [] : [current.service];
  return [old?.service, current?.service].filter((key) => key !== undefined);
}

/**
 * The slice fingerprints, indexed by Service as well, so that a Service leaving ip mode or deleted
 * drops its slices at once without a walk over every slice kept.
 */
export class SliceStore implements FingerprintStore<SliceFingerprint> {
  private readonly slices = new Map<string, SliceFingerprint>();
  private readonly byService = new Map<string, Set<string>>();

  get size(): number {
    return this.slices.size;
  }

  /** Services with at least one slice kept. */
  get services(): number {
    return this.byService.size;
  }

  get(key: string): SliceFingerprint | undefined {
    return this.slices.get(key);
  }

  set(key: string, fingerprint: SliceFingerprint): void {
    const old = this.slices.get(key);
    if (old !== undefined && old.service !== fingerprint.service) this.unindex(old.service, key);
    this.slices.set(key, fingerprint);
    let keys = this.byService.get(fingerprint.service);
    if (keys === undefined) this.byService.set(fingerprint.service, (keys = new Set()));
    keys.add(key);
  }

  delete(key: string): void {
    const old = this.slices.get(key);
    if (old === undefined) return;
    this.slices.delete(key);
    this.unindex(old.service, key);
  }

  keys(): IterableIterator<string> {
    return this.slices.keys();
  }

  /** Forgets every slice of the Service; returns how many. */
  forgetService(service: string): number {
    const keys = this.byService.get(service);
    if (keys === undefined) return 0;
    for (const key of keys) this.slices.delete(key);
    this.byService.delete(service);
    return keys.size;
  }

  private unindex(service: string, key: string): void {
    const keys = this.byService.get(service);
    keys?.delete(key);
    if (keys?.size === 0) this.byService.delete(service);
  }
}
