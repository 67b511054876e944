import { wantsLoadBalancer, type ClaimPolicy } from './claim';
import { EventType, goList, type ControllerEvent } from './events';
import type { Service, ServicePort } from './objects';

/** A field whose change matters to the load balancer, with the seed's Normal event if it had one. */
export interface ServiceChange {
  readonly field:
    | 'type'
    | 'loadBalancerSourceRanges'
    | 'ports'
    | 'sessionAffinity'
    | 'loadBalancerIP'
    | 'externalIPs'
    | 'annotations'
    | 'uid'
    | 'externalTrafficPolicy'
    | 'healthCheckNodePort'
    | 'ipFamilies';
  readonly event?: ControllerEvent;
}

/**
 * What changed between two versions of a Service that can change its load balancer (S3). Empty
 * means no update is needed. Unlike the seed, which stopped at the first difference, every
 * differing field is reported; the wants-LB flip alone is reported when it flips, since nothing
 * else matters then.
 */
export function needsUpdate(
  oldService: Service,
  newService: Service,
  claim: ClaimPolicy,
): ServiceChange[] {
  const oldWants = wantsLoadBalancer(oldService, claim);
  const newWants = wantsLoadBalancer(newService, claim);
  if (!oldWants && !newWants) return [];
  if (oldWants !== newWants) {
    return [
      change('type', 'Type', `${oldService.spec?.type ?? ''} -> ${newService.spec?.type ?? ''}`),
    ];
  }
  const before = oldService.spec ?? {};
  const after = newService.spec ?? {};
  const changes: ServiceChange[] = [];
  if (!sameList(before.loadBalancerSourceRanges, after.loadBalancerSourceRanges)) {
    changes.push(
      change(
        'loadBalancerSourceRanges',
        'LoadBalancerSourceRanges',
        `${goList(before.loadBalancerSourceRanges)} -> ${goList(after.loadBalancerSourceRanges)}`,
      ),
    );
  }
  if (!portsEqualForLB(before.ports, after.ports)) changes.push({ field: 'ports' });
  if ((before.sessionAffinity ?? '') !== (after.sessionAffinity ?? '')) {
    changes.push({ field: 'sessionAffinity' });
  }
  if ((before.loadBalancerIP ?? '') !== (after.loadBalancerIP ?? '')) {
    changes.push(
      change(
        'loadBalancerIP',
        'LoadbalancerIP',
        `${before.loadBalancerIP ?? ''} -> ${after.loadBalancerIP ?? ''}`,
      ),
    );
  }
  const externalIPs = externalIPsChange(before.externalIPs ?? [], after.externalIPs ?? []);
  if (externalIPs) changes.push(externalIPs);
  if (!sameMap(oldService.metadata?.annotations, newService.metadata?.annotations)) {
    changes.push({ field: 'annotations' });
  }
  const oldUid = oldService.metadata?.uid ?? '';
  const newUid = newService.metadata?.uid ?? '';
  if (oldUid !== newUid) changes.push(change('uid', 'UID', `${oldUid} -> ${newUid}`));
  if ((before.externalTrafficPolicy ?? '') !== (after.externalTrafficPolicy ?? '')) {
    changes.push(
      change(
        'externalTrafficPolicy',
        'ExternalTrafficPolicy',
        `${before.externalTrafficPolicy ?? ''} -> ${after.externalTrafficPolicy ?? ''}`,
      ),
    );
  }
  if ((before.healthCheckNodePort ?? 0) !== (after.healthCheckNodePort ?? 0)) {
    changes.push(
      change(
        'healthCheckNodePort',
        'HealthCheckNodePort',
        `${before.healthCheckNodePort ?? 0} -> ${after.healthCheckNodePort ?? 0}`,
      ),
    );
  }
  // Only the count matters: the primary family cannot change, a second one can come or go.
  if ((before.ipFamilies?.length ?? 0) !== (after.ipFamilies?.length ?? 0)) {
    changes.push({ field: 'ipFamilies' });
  }
  return changes;
}

/** Ports are equal for a load balancer when name, protocol, port, nodePort and appProtocol match, in order. */
export function portsEqualForLB(
  x: readonly ServicePort[] | undefined,
  y: readonly ServicePort[] | undefined,
): boolean {
  const a = x ?? [];
  const b = y ?? [];
  return a.length === b.length && a.every((port, i) => portEqualForLB(port, b[i]));
}

function portEqualForLB(x: ServicePort, y: ServicePort | undefined): boolean {
  return (
    y !== undefined &&
    (x.name ?? '') === (y.name ?? '') &&
    (x.protocol ?? 'TCP') === (y.protocol ?? 'TCP') &&
    x.port === y.port &&
    (x.nodePort ?? 0) === (y.nodePort ?? 0) &&
    (x.appProtocol ?? '') === (y.appProtocol ?? '')
  );
}

function externalIPsChange(
  before: readonly string[],
  after: readonly string[],
): ServiceChange | undefined {
  if (before.length !== after.length) {
    return change('externalIPs', 'ExternalIP', `Count: ${before.length} -> ${after.length}`);
  }
  const index = before.findIndex((ip, i) => ip !== after[i]);
  if (index < 0) return undefined;
  return change('externalIPs', 'ExternalIP', `Added: ${after[index] ?? ''}`);
}

function change(field: ServiceChange['field'], reason: string, message: string): ServiceChange {
  return { field, event: { type: EventType.Normal, reason, message } };
}

function sameList(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  const x = a ?? [];
  const y = b ?? [];
  return x.length === y.length && x.every((value, i) => value === y[i]);
}

function sameMap(
  a: Readonly<Record<string, string>> | undefined,
  b: Readonly<Record<string, string>> | undefined,
): boolean {
  const x = a ?? {};
  const y = b ?? {};
  const keys = Object.keys(x);
  return keys.length === Object.keys(y).length && keys.every((key) => x[key] === y[key]);
}
