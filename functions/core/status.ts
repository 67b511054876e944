import type { LoadBalancerIngress, LoadBalancerStatus, PortStatus } from './objects';

/**
 * Whether two load balancer statuses are the same, field by field and in order (upstream's
 * semantic DeepEqual since #125225: ip, hostname, ipMode, ports). Status is patched only when this
 * is false (S12). An absent ingress list equals an empty one.
 */
export function loadBalancerStatusEqual(
  a: LoadBalancerStatus | undefined,
  b: LoadBalancerStatus | undefined,
): boolean {
  const x = a?.ingress ?? [];
  const y = b?.ingress ?? [];
  return x.length === y.length && x.every((ingress, i) => ingressEqual(ingress, y[i]));
}

function ingressEqual(a: LoadBalancerIngress, b: LoadBalancerIngress | undefined): boolean {
  if (b === undefined) return false;
  const ports = (p: readonly PortStatus[] | undefined) => p ?? [];
  const [pa, pb] = [ports(a.ports), ports(b.ports)];
  return (
    (a.ip ?? '') === (b.ip ?? '') &&
    (a.hostname ?? '') === (b.hostname ?? '') &&
    (a.ipMode ?? '') === (b.ipMode ?? '') &&
    pa.length === pb.length &&
    pa.every(
      (port, i) =>
        port.port === pb[i]?.port &&
        port.protocol === pb[i]?.protocol &&
        (port.error ?? '') === (pb[i]?.error ?? ''),
    )
  );
}
