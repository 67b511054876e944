/**
 * Propagation under a burst of other work, on the world of propagation-world.ts: one quiet
 * Service behind another namespace's burst (fair queues or not), one namespace toggling its
 * Services' registrations against the shared budget (fair between namespaces or not), and a node
 * change in the middle of a burst (node queue or not).
 */
import { planNodeSync } from '../../functions/core/node-sync-plan';
import { targetNodeLabelsAnnotation } from '../../functions/core/target-node-labels';
import type { WorkMessage } from '../../functions/contract/work-messages';
import { defaultRegistrationBudget } from '../../functions/aws/registration-budget';
import { makeNode } from '../../kit/core-objects';
import { runEventSourceMapping } from '../sim/fake-runtime';
import { median } from '../support/stats';
import { instanceId, nodeFor, ourWorld, worldModel, type SimService } from './propagation-world';

export interface BurstRun {
  readonly fairQueue: boolean;
  readonly burstServices: number;
  /** From the quiet Service's change to its NLB updated. */
  readonly quietMs: number;
  /** From the burst's start until each burst Service's NLB was updated. */
  readonly burstP50Ms: number;
  readonly burstMaxMs: number;
  /** Burst Services whose NLB was updated (all of them, or the run failed). */
  readonly burstConverged: number;
  /** The most groups SQS would have counted noisy at once (ApproximateNumberOfNoisyGroups). */
  readonly noisyGroupsPeak: number;
  readonly throttledAttempts: number;
  readonly elbv2Attempts: number;
  readonly wallMs: number;
}

/**
 * One namespace floods the queue (issue 19, finding 7): `burstServices` Services in namespace
 * `burst` all need work at once (a tenant applying hundreds of Services, or an annotation-toggle
 * loop), and a moment later one Service in namespace `quiet` changes. Each message costs what a
 * host update costs (two RegisterTargets, under the account's registration bucket): the bench's
 * fake ELBv2 serves only the calls a host update makes, and a create costs more, so the real
 * delay without fair queues is longer still. The forwarder sends the burst in batches of 10, one
 * SendMessageBatch after another; the quiet change is sent `quietAfterMs` after the burst began.
 */
export async function simulateNamespaceBurst(options: {
  readonly fair: boolean;
  readonly burstServices?: number;
  readonly quietAfterMs?: number;
}): Promise<BurstRun> {
  const started = performance.now();
  const burstServices = options.burstServices ?? 500;
  const quietAfterMs = options.quietAfterMs ?? 5_000;
  const model = worldModel;
  const services: SimService[] = [
    ...Array.from({ length: burstServices }, (_, i) => ({ namespace: 'burst', name: `svc-${i}` })),
    { namespace: 'quiet', name: 'web' },
  ];
  const world = ourWorld(services, {
    elbv2CallsPerSecond: model.elbv2CallsPerSecond,
    seed: burstServices * 7919 + 1,
    fairQueue: options.fair,
    budget: defaultRegistrationBudget,
  });
  await world.ready();
  const { clock, account, queue, table, kube, completions } = world;
  // Node sync already stored the new host set: each message below is one Service's host update.
  kube.nodes = [...kube.nodes, world.added];
  table.seedEligibleHosts(planNodeSync(kube.nodes, 'stable', undefined, []).eligible);
  const hostUpdate = (key: string): WorkMessage => ({ v: 1, kind: 'hosts', key });
  let quietSentAt = Number.NaN;
  let stopped = false;
  const main = (async () => {
    runEventSourceMapping(queue, clock, world.runtimes, world.esm, () => stopped);
    const burst = (async () => {
      for (let i = 0; i < burstServices; i += 10) {
        const keys = services.slice(i, Math.min(i + 10, burstServices));
        await queue.sendFromForwarder(keys.map((s) => hostUpdate(`${s.namespace}/${s.name}`)));
      }
    })();
    await clock.sleep(quietAfterMs);
    await clock.sleep(model.watchMs);
    quietSentAt = clock.ms;
    await queue.sendFromForwarder([hostUpdate('quiet/web')]);
    await burst;
    await world.done;
    stopped = true;
  })();
  await clock.run(main, 6 * 3600_000);
  const burstTimes = [...completions]
    .filter(([key]) => key.startsWith('burst/'))
    .map(([, ms]) => ms)
    .sort((a, b) => a - b);
  return {
    fairQueue: options.fair,
    burstServices,
    quietMs: (completions.get('quiet/web') ?? Number.NaN) - (quietSentAt - model.watchMs),
    burstP50Ms: median(burstTimes),
    burstMaxMs: burstTimes.at(-1) ?? Number.NaN,
    burstConverged: burstTimes.length,
    noisyGroupsPeak: queue.stats.noisyGroupsPeak,
    throttledAttempts: account.stats.throttled,
    elbv2Attempts: account.stats.attempts,
    wallMs: performance.now() - started,
  };
}

export interface BudgetFairnessRun {
  readonly perNamespace: boolean;
  readonly attackerServices: number;
  readonly togglePeriodMs: number;
  readonly toggleForMs: number;
  /** From the quiet Service's change (a node it must register) to its NLB having the node. */
  readonly quietMs: number;
  /** Of which its calls waited on the budget (slots, and turns behind other namespaces). */
  readonly quietBudgetWaitMs: number;
  /** The attacker's RegisterTargets/DeregisterTargets served while it toggled. */
  readonly attackerCalls: number;
  /** What the budget allows in that time: burst + rate × time. */
  readonly budgetCallsAllowed: number;
  readonly elbv2Attempts: number;
  readonly throttledAttempts: number;
  readonly budgetWrites: number;
  readonly budgetRefused: number;
  /** Syncs that ended requeue-after on the budget (the attacker's, mostly). */
  readonly budgetRequeues: number;
  readonly wallMs: number;
}

/**
 * One namespace hogs the registration budget (issue 32, finding 9): `attackerServices` Services in
 * namespace `tenant-a` flip `aws-load-balancer-target-node-labels` between two node groups every
 * `togglePeriodMs` for `toggleForMs` (each flip deregisters one group and registers the other in
 * both target groups: 4 budget calls a Service). `quietAfterMs` in, a node joins and the Service in
 * namespace `quiet` registers it. Each flip is sent as the host update it causes: the bench's fake
 * ELBv2 serves only host-update calls, and a real flip is a full sync, with more reads and the same
 * registrations. Same runtime, fakes and rate limits as the other runs, with the default budget and
 * fair queues; `perNamespace` false books the budget first come, first served, as before.
 */
export async function simulateBudgetFairness(options: {
  readonly perNamespace: boolean;
  readonly attackerServices?: number;
  readonly togglePeriodMs?: number;
  readonly toggleForMs?: number;
  readonly quietAfterMs?: number;
}): Promise<BudgetFairnessRun> {
  const started = performance.now();
  const model = worldModel;
  const attackerServices = options.attackerServices ?? 100;
  const togglePeriodMs = options.togglePeriodMs ?? 5_000;
  const toggleForMs = options.toggleForMs ?? 60_000;
  const quietAfterMs = options.quietAfterMs ?? 20_000;
  const services: SimService[] = [
    ...Array.from({ length: attackerServices }, (_, i) => ({
      namespace: 'tenant-a',
      name: `svc-${i}`,
    })),
    { namespace: 'quiet', name: 'web' },
  ];
  const budget = defaultRegistrationBudget;
  const world = ourWorld(services, {
    elbv2CallsPerSecond: model.elbv2CallsPerSecond,
    seed: attackerServices * 7919 + 9,
    fairQueue: true,
    budget,
    budgetPerNamespace: options.perNamespace,
  });
  await world.ready();
  const { clock, account, queue, table, kube, completions } = world;
  // Two node groups the attacker's selectors flip between; the node that joins is in neither.
  const groupOf = (n: number) => (n <= 2 ? 'a' : 'b');
  kube.nodes = Array.from({ length: model.initialNodes }, (_, i) =>
    makeNode(`ip-10-0-0-${i + 1}.ec2.internal`, {
      instanceId: instanceId(i + 1),
      labels: { role: groupOf(i + 1) },
    }),
  );
  const storeHosts = () =>
    table.seedEligibleHosts(planNodeSync(kube.nodes, 'stable', undefined, [], ['role']).eligible);
  storeHosts();
  const attackerKeys = services.slice(0, attackerServices).map((s) => `${s.namespace}/${s.name}`);
  let attackerCalls = 0;
  const onAdded = account.onTargetsChanged;
  account.onTargetsChanged = (tg) => {
    onAdded?.(tg);
    if (tg.serviceKey.startsWith('tenant-a/') && clock.ms <= toggleForMs) attackerCalls++;
  };
  const hostUpdate = (key: string): WorkMessage => ({ v: 1, kind: 'hosts', key });
  let quietChangedAt = Number.NaN;
  let stopped = false;
  const main = (async () => {
    runEventSourceMapping(queue, clock, world.runtimes, world.esm, () => stopped);
    const attacker = (async () => {
      for (let round = 0; round * togglePeriodMs < toggleForMs; round++) {
        const at = round * togglePeriodMs;
        if (clock.ms < at) await clock.sleep(at - clock.ms);
        for (const key of attackerKeys) {
          const [namespace = '', name = ''] = key.split('/');
          const service = await kube.getService(namespace, name);
          if (service === undefined) continue;
          kube.put({
            ...service,
            metadata: {
              ...service.metadata,
              annotations: {
                ...service.metadata?.annotations,
                [targetNodeLabelsAnnotation]: `role=${round % 2 === 0 ? 'a' : 'b'}`,
              },
            },
          });
        }
        for (let i = 0; i < attackerKeys.length; i += 10) {
          await queue.sendFromForwarder(attackerKeys.slice(i, i + 10).map(hostUpdate));
        }
      }
    })();
    await clock.sleep(quietAfterMs);
    kube.nodes = [...kube.nodes, world.added];
    quietChangedAt = clock.ms;
    storeHosts();
    await clock.sleep(model.watchMs);
    await queue.sendFromForwarder([hostUpdate('quiet/web')]);
    while (!completions.has('quiet/web')) await clock.sleep(50);
    await attacker;
    if (clock.ms < toggleForMs) await clock.sleep(toggleForMs - clock.ms);
    stopped = true;
  })();
  await clock.run(main, 6 * 3600_000);
  return {
    perNamespace: options.perNamespace,
    attackerServices,
    togglePeriodMs,
    toggleForMs,
    quietMs: (completions.get('quiet/web') ?? Number.NaN) - quietChangedAt,
    quietBudgetWaitMs: world.budgetItem.stats.waitMsByNamespace.get('quiet') ?? 0,
    attackerCalls,
    budgetCallsAllowed: budget.burst + (budget.perSecond * toggleForMs) / 1000,
    elbv2Attempts: account.stats.attempts,
    throttledAttempts: account.stats.throttled,
    budgetWrites: world.budgetItem.stats.writes,
    budgetRefused: world.budgetItem.stats.refused,
    budgetRequeues: world.metrics.counts.get('Syncs.requeue-after') ?? 0,
    wallMs: performance.now() - started,
  };
}

export interface NodeDuringBurstRun {
  readonly nodeQueue: boolean;
  readonly burstServices: number;
  /** From the node change to node sync having stored the new host set. */
  readonly nodeSyncMs: number;
  /** From the node change to the quiet Service's NLB having the node. */
  readonly quietMs: number;
  /** From the node change to the last NLB having the node. */
  readonly lastMs: number;
  readonly wallMs: number;
}

/**
 * A node change during a burst (issue 21 item 1): `burstServices` Services each need a host update
 * (two RegisterTargets, on the account's registration bucket) when, 5 s in, a node joins. With the
 * node queue the node-sync pass runs at once; on a shared queue its message waits for a poller
 * that the burst keeps busy. The burst stands in for creates: the bench's fake ELBv2 serves only
 * the calls a host update makes, and a create costs more, so a real create burst holds a shared
 * queue longer still.
 */
export async function simulateNodeChangeDuringBurst(options: {
  readonly nodeQueue: boolean;
  readonly burstServices?: number;
}): Promise<NodeDuringBurstRun> {
  const started = performance.now();
  const model = worldModel;
  const burstServices = options.burstServices ?? 1000;
  const services: SimService[] = [
    ...Array.from({ length: burstServices }, (_, i) => ({
      namespace: `burst-${i % 20}`,
      name: `svc-${i}`,
    })),
    { namespace: 'quiet', name: 'web' },
  ];
  const world = ourWorld(services, {
    elbv2CallsPerSecond: model.elbv2CallsPerSecond,
    seed: burstServices * 7919 + 5,
    fairQueue: true,
    budget: defaultRegistrationBudget,
    nodeQueue: options.nodeQueue,
  });
  await world.ready();
  const { clock, queue, table, kube, completions } = world;
  // The burst's own work: every Service lacks a node that node sync has already stored.
  const burstNode = nodeFor(model.initialNodes + 2);
  kube.nodes = [...kube.nodes, burstNode];
  table.seedEligibleHosts(planNodeSync(kube.nodes, 'stable', undefined, []).eligible);
  const before = table.eligibleHash;
  let changedAt = Number.NaN;
  let nodeSyncAt = Number.NaN;
  let stopped = false;
  const main = (async () => {
    world.startFunctions(() => stopped);
    const burst = (async () => {
      for (let i = 0; i < burstServices; i += 10) {
        const keys = services.slice(i, Math.min(i + 10, burstServices));
        await queue.sendFromForwarder(
          keys.map((s) => ({ v: 1, kind: 'hosts', key: `${s.namespace}/${s.name}` })),
        );
      }
    })();
    await clock.sleep(5_000);
    kube.nodes = [...kube.nodes, world.added];
    changedAt = clock.ms;
    await clock.sleep(model.watchMs);
    await world.nodeQueue.sendFromForwarder([{ v: 1, kind: 'node', reason: 'node added' }]);
    while (table.eligibleHash === before) await clock.sleep(10);
    nodeSyncAt = clock.ms;
    await burst;
    await world.done;
    stopped = true;
  })();
  await clock.run(main, 6 * 3600_000);
  const times = [...completions.values()].sort((a, b) => a - b);
  return {
    nodeQueue: options.nodeQueue,
    burstServices,
    nodeSyncMs: nodeSyncAt - changedAt,
    quietMs: (completions.get('quiet/web') ?? Number.NaN) - changedAt,
    lastMs: (times.at(-1) ?? Number.NaN) - changedAt,
    wallMs: performance.now() - started,
  };
}
