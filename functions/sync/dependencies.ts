import type { ClaimPolicy } from '../core/claim';
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
  for (const warning of plan.warnings) await deps.events.record(warning.object, warning.event);
  return plan.eligible;
}
