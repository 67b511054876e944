import { quoted } from './echo';
import { TerminalError } from './errors';
import { loadBalancerPorts, type LoadBalancerPort, type TargetKind } from './lb-ports';
import type { Service } from './objects';
import { sizeProblems } from './service-limits';

/**
 * Service fields this controller cannot honour. Each gets a terminal Warning that names it rather
 * than being silently ignored (docs/design.md §2).
 */
export function unsupportedFields(service: Service, targets: TargetKind = 'nodes'): string[] {
  const spec = service.spec ?? {};
  const problems: string[] = [];
  if (spec.allocateLoadBalancerNodePorts === false && targets === 'nodes') {
    problems.push(
      'spec.allocateLoadBalancerNodePorts: false is not supported (instance targets need NodePorts)',
    );
  }
  if (spec.loadBalancerIP !== undefined && spec.loadBalancerIP !== '') {
    problems.push(
      'spec.loadBalancerIP is not supported by Network Load Balancers (use Elastic IP annotations)',
    );
  }
  const families = spec.ipFamilies ?? ['IPv4'];
  if (families.length > 1 || families.some((family) => family !== 'IPv4')) {
    // Kubernetes allows two families; anything longer is only echoed in part.
    const shown = families.slice(0, 2).map((family) => quoted(String(family)));
    const more = families.length > 2 ? `, … (${families.length} entries)` : '';
    problems.push(`spec.ipFamilies [${shown.join(',')}${more}] is not supported: only IPv4 is`);
  }
  return problems;
}

/**
 * Everything the core can check about a Service before any cloud call; throws a TerminalError
 * naming every problem. Sizes come first and alone: a Service over a limit is refused from its
 * counts, before its ports are grouped or anything else is built from it.
 */
export function validateLoadBalancerService(
  service: Service,
  targets: TargetKind = 'nodes',
): LoadBalancerPort[] {
  const tooLarge = sizeProblems(service);
  if (tooLarge.length > 0) throw new TerminalError(tooLarge.join('; '));
  const problems = unsupportedFields(service, targets);
  let ports: LoadBalancerPort[] = [];
  try {
    ports = loadBalancerPorts(service, targets);
  } catch (error) {
    if (!(error instanceof TerminalError)) throw error;
    problems.push(error.message);
  }
  if (problems.length > 0) throw new TerminalError(problems.join('; '));
  return ports;
}
