import type { Service } from '../core/objects';
import type { Announced, LifecycleRecorder, LoadBalancerSummary } from './ports';

/**
 * What the lifecycle feed hears after an Ensure or a host update, and what the record keeps:
 * LoadBalancerEnsured when the LB's shape differs from the one last announced, and
 * LoadBalancerHostsUpdated when its instances differ from those last announced. Comparing with what
 * was announced, not with what this one call changed, keeps the feed right across failed passes:
 * a change made by a pass that failed later is announced by the pass that completes.
 *
 * `silent` takes the current state as the baseline without announcing it: records written before
 * the feed existed, whose LB was announced by nobody and changed by nothing now.
 */
export function announce(
  service: Service,
  previous: Announced | undefined,
  now: {
    readonly summary?: LoadBalancerSummary | undefined;
    readonly instances: readonly string[];
  },
  lifecycle: LifecycleRecorder,
  options: { readonly silent?: boolean } = {},
): Announced {
  const instances = [...now.instances].sort();
  const { summary } = now;
  const shapeChanged =
    summary !== undefined &&
    (previous === undefined || (previous.shape !== undefined && previous.shape !== summary.shape));
  if (!options.silent && shapeChanged) lifecycle.ensured(service, summary);
  if (!options.silent && previous !== undefined) {
    const before = new Set(previous.instances);
    const after = new Set(instances);
    const added = instances.filter((id) => !before.has(id));
    const removed = previous.instances.filter((id) => !after.has(id));
    if (added.length + removed.length > 0) lifecycle.hostsUpdated(service, { added, removed });
  }
  return {
    shape: summary?.shape ?? previous?.shape,
    loadBalancerId: summary?.loadBalancerId ?? previous?.loadBalancerId,
    instances,
  };
}
