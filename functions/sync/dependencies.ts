import type { ClaimPolicy } from '../core/claim';
import type { HostSet } from '../core/hosts';
import type { NodePolicy } from '../core/node-policy';
import { planNodeSync, type EligibleHosts } from '../core/node-sync-plan';
import type {
  Clock,
  EventRecorder,
  KubernetesApi,
  LifecycleRecorder,
  LoadBalancerProvider,
  StateStore,
} from './ports';

/** Everything a use case needs, injected. */
export interface SyncDependencies {
  readonly kube: KubernetesApi;
  readonly provider: LoadBalancerProvider;
  readonly state: StateStore;
  readonly events: EventRecorder;
  readonly lifecycle: LifecycleRecorder;
  readonly clock: Clock;
  readonly claim: ClaimPolicy;
  readonly nodePolicy: NodePolicy;
}

/**
 * The eligible hosts as node sync last stored them. Before node sync has ever run, they are
 * worked out from a Node list once and stored, so the first Service does not wait for the schedule.
 */
export async function currentEligibleHosts(deps: SyncDependencies): Promise<EligibleHosts> {
  const stored = await deps.state.getEligibleHosts();
  if (stored !== undefined) return stored;
  const plan = planNodeSync(await deps.kube.listNodes(), deps.nodePolicy, undefined, []);
  await deps.state.putEligibleHosts(plan.eligible);
  announceNodeSet(undefined, plan.eligible, deps);
  for (const warning of plan.warnings) await deps.events.record(warning.object, warning.event);
  return plan.eligible;
}

/** NodeSetChanged, when the eligible instances differ (a change of warned nodes alone is not one). */
export function announceNodeSet(
  previous: HostSet | undefined,
  next: HostSet,
  deps: SyncDependencies,
): void {
  const before = new Set(previous?.hosts.map((h) => h.instanceId) ?? []);
  const after = new Set(next.hosts.map((h) => h.instanceId));
  const added = [...after].filter((id) => !before.has(id)).sort();
  const removed = [...before].filter((id) => !after.has(id)).sort();
  if (added.length + removed.length === 0) return;
  deps.lifecycle.nodeSetChanged({ added, removed, eligibleHosts: next.hosts.length });
}
