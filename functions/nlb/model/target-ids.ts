import type { IpTarget } from '../../core/endpoint-targets';

// How a target is named in the model, the plan and provider state: an instance by its ID, a pod
// by `ip:port`, since a pod target group registers each pod on a port of its own. One string per
// target keeps the set arithmetic (what to register, what to deregister) the same for both.

export function ipTargetId(target: IpTarget): string {
  return `${target.ip}:${target.port}`;
}

/** A target as RegisterTargets and DeregisterTargets take it. */
export function targetDescription(id: string): { Id: string; Port?: number } {
  // The last colon: an IPv6 address has colons of its own.
  const colon = id.lastIndexOf(':');
  if (colon < 0) return { Id: id };
  return { Id: id.slice(0, colon), Port: Number(id.slice(colon + 1)) };
}

/** A registered target as DescribeTargetHealth names it, in the model's form. */
export function registeredTargetId(
  target: { readonly Id?: string | undefined; readonly Port?: number | undefined },
  targetType: 'instance' | 'ip',
): string {
  const id = target.Id ?? '';
  if (id === '' || targetType === 'instance') return id;
  return target.Port === undefined ? id : `${id}:${target.Port}`;
}
