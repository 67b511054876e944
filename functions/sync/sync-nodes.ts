import type { ServiceKey } from '../core/keys';
import { planNodeSync, type EligibleHosts } from '../core/node-sync-plan';
import type { HostSet } from '../core/hosts';
import type { SyncDependencies } from './dependencies';

export interface NodeSyncResult {
  /** Services whose LB needs a host update: enqueue each key for syncHosts. */
  readonly servicesToUpdate: readonly ServiceKey[];
  readonly eligibleHosts: number;
  readonly changed: boolean;
}

/** A node-sync pass worked out but not stored yet (`storeNodeSync`). */
export interface PlannedNodeSync extends NodeSyncResult {
  /** The eligible host set this pass decided. */
  readonly eligible: EligibleHosts;
  readonly store: () => Promise<void>;
}

/**
 * One node-sync pass: list Nodes, decide the eligible host set, store it when it changed, warn about
 * nodes that cannot be targets, and name the Services whose LB has other hosts.
 */
export async function syncNodes(deps: SyncDependencies): Promise<NodeSyncResult> {
  const planned = await planNodeSyncPass(deps);
  await planned.store();
  return {
    servicesToUpdate: planned.servicesToUpdate,
    eligibleHosts: planned.eligibleHosts,
    changed: planned.changed,
  };
}

/**
 * The pass's reads and decision, with its writes (store the set, announce the change, warn about
 * nodes that cannot be targets) left to `store`: host updates given the set need not wait for
 * them (issue 37); ones that read it back must.
 */
export async function planNodeSyncPass(deps: SyncDependencies): Promise<PlannedNodeSync> {
  const [nodes, previous, services] = await Promise.all([
    deps.kube.listNodes(),
    deps.state.getEligibleHosts(),
    deps.state.listServiceHosts(),
  ]);
  const plan = planNodeSync(nodes, deps.nodePolicy, previous, services);
  return {
    servicesToUpdate: plan.servicesToUpdate,
    eligibleHosts: plan.eligible.hosts.length,
    changed: plan.changed,
    eligible: plan.eligible,
    store: async () => {
      if (plan.changed) {
        await deps.state.putEligibleHosts(plan.eligible);
        announceNodeSet(previous, plan.eligible, deps);
      }
      for (const warning of plan.warnings) await deps.events.record(warning.object, warning.event);
    },
  };
}

/**
 * NodeSetChanged, when the eligible instances differ (a change of warned nodes alone is not one).
 * Only node sync announces, under its lease: a service sync that stores the first host set does
 * so unannounced, as several may do it at once.
 */
function announceNodeSet(
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
