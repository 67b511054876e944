/**
 * The pods an `ip`-mode NLB target group sends a Service port's traffic to, read from the
 * Service's EndpointSlices (discovery.k8s.io/v1) as kube-proxy and aws-load-balancer-controller
 * read them (issue 36):
 *
 * - an endpoint serves when it is ready (`ready` absent counts as ready, as Kubernetes asks
 *   consumers to treat an unknown state); a ready endpoint is never terminating, since the
 *   EndpointSlice controller sets ready = serving and not terminating;
 * - a terminating endpoint is reported apart, so its target is deregistered first and drains
 *   through the target group's deregistration delay instead of taking new connections;
 * - only endpoints backed by a Pod of the slice's own namespace count (`targetRef`), at their
 *   first address: a reference to another namespace's pod is not this Service's to expose;
 * - the port is the slice's port named as the Service port is (a slice's port carries the
 *   targetPort resolved for its endpoints, so named ports resolve per slice), with its protocol;
 *   an unnamed Service port (a Service may have one only alone) matches the slice's unnamed port;
 * - only slices of the target group's address family count.
 */

import { canonicalJson, stableHash, type JsonValue } from './hash';

export interface EndpointConditions {
  readonly ready?: boolean | undefined;
  readonly serving?: boolean | undefined;
  readonly terminating?: boolean | undefined;
}

export interface SliceEndpoint {
  readonly addresses: readonly string[];
  readonly conditions?: EndpointConditions | undefined;
  readonly targetRef?:
    { readonly kind?: string | undefined; readonly namespace?: string | undefined } | undefined;
}

export interface SlicePort {
  readonly name?: string | undefined;
  readonly port?: number | undefined;
  readonly protocol?: string | undefined;
}

export interface EndpointSliceView {
  /** The slice's namespace (its Service's); undefined where the caller has only one. */
  readonly namespace?: string | undefined;
  readonly addressType: string;
  readonly ports?: readonly SlicePort[] | undefined;
  readonly endpoints: readonly SliceEndpoint[];
}

/** A target of an `ip` target group: a pod address and the port it listens on. */
export interface IpTarget {
  readonly ip: string;
  readonly port: number;
}

export interface PortTargets {
  /** Endpoints to register: ready pods. */
  readonly serving: readonly IpTarget[];
  /** Endpoints on their way out: deregistered first, never registered. */
  readonly terminating: readonly IpTarget[];
}

export function ipTargetsFor(
  servicePort: { readonly name?: string | undefined; readonly protocol?: string | undefined },
  slices: readonly EndpointSliceView[],
  addressType: 'IPv4' | 'IPv6',
): PortTargets {
  const serving = new Map<string, IpTarget>();
  const terminating = new Map<string, IpTarget>();
  const protocol = servicePort.protocol ?? 'TCP';
  for (const slice of slices) {
    if (slice.addressType !== addressType) continue;
    const port = (slice.ports ?? []).find(
      (p) => (p.name ?? '') === (servicePort.name ?? '') && (p.protocol ?? 'TCP') === protocol,
    )?.port;
    if (port === undefined) continue;
    for (const endpoint of slice.endpoints) {
      const ip = endpoint.addresses[0];
      if (ip === undefined || !ownPod(slice, endpoint)) continue;
      const target = { ip, port };
      const key = `${ip}:${port}`;
      const conditions = endpoint.conditions ?? {};
      if (conditions.ready !== false) serving.set(key, target);
      else if (conditions.terminating === true) terminating.set(key, target);
    }
  }
  // The same pod in two slices (a slice being replaced) is one target; serving wins.
  for (const key of serving.keys()) terminating.delete(key);
  return { serving: sorted(serving), terminating: sorted(terminating) };
}

/** An endpoint backed by a Pod in the slice's namespace (a reference without one means that). */
function ownPod(slice: EndpointSliceView, endpoint: SliceEndpoint): boolean {
  const ref = endpoint.targetRef;
  if (ref?.kind !== 'Pod') return false;
  return (
    ref.namespace === undefined ||
    ref.namespace === '' ||
    slice.namespace === undefined ||
    ref.namespace === slice.namespace
  );
}

function sorted(targets: Map<string, IpTarget>): IpTarget[] {
  return [...targets.values()].sort((a, b) =>
    a.ip === b.ip ? a.port - b.port : a.ip < b.ip ? -1 : 1,
  );
}

/**
 * What of one slice `ipTargetsFor` reads, in a canonical form: two versions of a slice with the
 * same projection give every target group the same targets. The forwarder compares it to decide
 * whether a slice change is worth a message; the targets sync hashes all of a Service's slices'
 * projections to decide whether its targets need a look at AWS.
 */
export function sliceProjection(slice: EndpointSliceView): JsonValue {
  const ports = (slice.ports ?? [])
    .map((p) => [p.name ?? '', p.protocol ?? 'TCP', p.port ?? -1] as const)
    .sort((a, b) => (a.join() < b.join() ? -1 : a.join() > b.join() ? 1 : 0));
  const endpoints = slice.endpoints
    .filter((e) => ownPod(slice, e) && e.addresses[0] !== undefined)
    .map((e) => {
      const conditions = e.conditions ?? {};
      const state =
        conditions.ready !== false
          ? 'serving'
          : conditions.terminating === true
            ? 'terminating'
            : 'out';
      return `${e.addresses[0] ?? ''}=${state}`;
    })
    .filter((entry) => !entry.endsWith('=out'))
    .sort();
  return [slice.addressType, ports.map((p) => [...p]), endpoints];
}

/** A digest of a Service's slices as the targets sync reads them: order of slices ignored. */
export function endpointsDigest(slices: readonly EndpointSliceView[]): string {
  return stableHash(slices.map((slice) => canonicalJson(sliceProjection(slice))).sort());
}
