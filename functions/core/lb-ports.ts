import { clipped, joinProblems } from './echo';
import { TerminalError } from './errors';
import type { Service, ServicePort } from './objects';
import { countProblem, serviceLimits } from './service-limits';

export type ListenerProtocol = 'TCP' | 'UDP' | 'TCP_UDP';

/** What a Service's load balancer sends traffic to: its nodes' NodePorts, or its pods. */
export type TargetKind = 'nodes' | 'pods';

/** One NLB listener: a Service port number, its protocol, and the nodePort its targets use. */
export interface LoadBalancerPort {
  readonly port: number;
  readonly protocol: ListenerProtocol;
  /** 0 when the targets are pods and the Service has none. */
  readonly nodePort: number;
  /** The pods' port: a number, or a port name resolved per EndpointSlice (the port by default). */
  readonly targetPort: number | string;
  /** The Service port names merged into this listener. */
  readonly names: readonly string[];
}

/** Network Load Balancer quota: listeners per load balancer. */
export const maxListeners = 50;

/**
 * The listeners a Service needs (S14): one per port and protocol, except that TCP and UDP on the
 * same port become one TCP_UDP listener, which AWS allows only with one target port, so both must
 * share a nodePort. Throws a TerminalError naming every problem.
 */
export function loadBalancerPorts(
  service: Service,
  targets: TargetKind = 'nodes',
): LoadBalancerPort[] {
  const servicePorts = service.spec?.ports ?? [];
  // From the count, before a single port is looked at (issue 19: work before limits).
  const tooMany = countProblem('spec.ports', servicePorts.length, serviceLimits.servicePorts);
  if (tooMany !== undefined) throw new TerminalError(tooMany);
  const problems: string[] = [];
  const byPort = new Map<number, ServicePort[]>();
  if (servicePorts.length === 0) problems.push('a LoadBalancer Service needs at least one port');
  for (const port of servicePorts) {
    const protocol = port.protocol ?? 'TCP';
    if (protocol !== 'TCP' && protocol !== 'UDP') {
      problems.push(
        `port ${port.port}/${clipped(String(protocol))}: Network Load Balancers support TCP and UDP only`,
      );
      continue;
    }
    if (!port.nodePort && targets === 'nodes') {
      problems.push(`port ${port.port}/${protocol} has no nodePort: instance targets need one`);
      continue;
    }
    byPort.set(port.port, [...(byPort.get(port.port) ?? []), port]);
  }
  const listeners: LoadBalancerPort[] = [];
  for (const [portNumber, ports] of [...byPort].sort(([a], [b]) => a - b)) {
    const protocols = ports.map((p) => p.protocol ?? 'TCP');
    if (new Set(protocols).size !== protocols.length) {
      problems.push(`port ${portNumber} is listed twice with the same protocol`);
      continue;
    }
    const names = ports.map((p) => p.name ?? '');
    const [first, second] = ports;
    if (first === undefined) continue;
    if (second === undefined) {
      listeners.push({
        port: portNumber,
        protocol: (first.protocol ?? 'TCP') as 'TCP' | 'UDP',
        nodePort: first.nodePort ?? 0,
        targetPort: targetPortOf(first),
        names,
      });
    } else if (targets === 'pods' && targetPortOf(first) !== targetPortOf(second)) {
      problems.push(
        `ports ${portNumber}/TCP and ${portNumber}/UDP must use the same targetPort to share a TCP_UDP listener with pod targets (they use ${clipped(String(targetPortOf(first)))} and ${clipped(String(targetPortOf(second)))})`,
      );
    } else if (targets === 'nodes' && first.nodePort !== second.nodePort) {
      problems.push(
        `ports ${portNumber}/TCP and ${portNumber}/UDP must use the same nodePort to share a TCP_UDP listener (they use ${first.nodePort ?? 0} and ${second.nodePort ?? 0})`,
      );
    } else {
      listeners.push({
        port: portNumber,
        protocol: 'TCP_UDP',
        nodePort: first.nodePort ?? 0,
        targetPort: targetPortOf(first),
        names,
      });
    }
  }
  if (listeners.length > maxListeners) {
    problems.push(
      `${listeners.length} listeners exceed the Network Load Balancer limit of ${maxListeners}`,
    );
  }
  if (problems.length > 0) throw new TerminalError(joinProblems(problems));
  return listeners;
}

function targetPortOf(port: ServicePort): number | string {
  const target = port.targetPort;
  return target === undefined || target === '' || target === 0 ? port.port : target;
}
