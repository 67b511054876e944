import { hostsSelectedBy, type ServiceHostSet } from '../core/hosts';
import { planNodeSync, type EligibleHosts } from '../core/node-sync-plan';
import type { Service } from '../core/objects';
import { readNodeSelector, selectorKeys } from '../core/target-node-labels';
import type { SyncDependencies } from './dependencies';

/**
 * The eligible hosts as node sync last stored them. Before node sync has ever run, they are
 * worked out from a Node list once and stored, so the first Service does not wait for the schedule.
 */
export async function currentEligibleHosts(
  deps: SyncDependencies,
  labelKeys: readonly string[] = [],
): Promise<EligibleHosts> {
  const stored = await deps.state.getEligibleHosts();
  if (stored !== undefined) return stored;
  const plan = planNodeSync(await deps.kube.listNodes(), deps.nodePolicy, undefined, [], labelKeys);
  await deps.state.putEligibleHosts(plan.eligible);
  for (const warning of plan.warnings) await deps.events.record(warning.object, warning.event);
  return plan.eligible;
}

/**
 * The hosts of one Service: the eligible hosts its target-node-labels select, or all of them.
 * When the stored set does not track a label the Service selects by (a new or changed selector
 * that node sync has not seen yet), the hosts are worked out from a fresh Node list instead, not
 * stored: node sync tracks the label from its next pass on, once the Service's record names it.
 */
export async function hostsForService(
  deps: SyncDependencies,
  service: Service,
  lastSelector: string | undefined,
  /** The eligible hosts when the caller has them already (node sync's own pass). */
  known?: EligibleHosts,
): Promise<ServiceHostSet> {
  // An annotation that cannot be read keeps the selection the LB was last synced with: the
  // provider refuses the Service with a Warning, and a host update meanwhile must not register
  // every node.
  const reading = readNodeSelector(service);
  const selector = reading.valid ? reading.selector : lastSelector;
  const keys = selectorKeys(selector);
  const eligible = known ?? (await currentEligibleHosts(deps, keys));
  if (selector === undefined) return hostsSelectedBy(eligible, undefined);
  const tracked = new Set(eligible.labelKeys ?? []);
  const from = keys.every((key) => tracked.has(key))
    ? eligible
    : planNodeSync(await deps.kube.listNodes(), deps.nodePolicy, eligible, [], keys).eligible;
  return hostsSelectedBy(from, selector);
}
