/**
 * Node-change propagation: from a node added in the API server to every affected NLB having it
 * as a target, for 1, 100 and 1,000 LoadBalancer Services, on virtual time.
 *
 * Ours: the real runtime (processWorkBatch → runNodeSync → syncNodes; processWorkBatch →
 * processKey → syncHosts → NlbProvider.updateLoadBalancer) over in-memory fakes: a queue and event
 * source mapping, a state table with lease semantics, a Kubernetes API, and ELBv2 with AWS's
 * account-level token buckets; each Lambda instance has its own SDK clients (the per-process
 * limiter of functions/aws/clients.ts and the SDK's adaptive retries). Every remote call takes
 * the same fixed latency.
 *
 * The seed (v1.15/1.16 service controller with cloud-provider-aws): a 100 s node-sync loop; when
 * the node set changed, UpdateLoadBalancer for every LB Service, one after another, 16 ELBv2/EC2
 * calls each (docs/design.md §5, counted from cloud-provider-aws), same buckets and latency.
 *
 * Ours runs in the world of propagation-world.ts; the runs under a burst of other work are in
 * propagation-bursts.ts, and the pod-target runs (issue 36) in propagation-pods.ts.
 */
import { defaultRegistrationBudget } from '../../functions/aws/registration-budget';
import { type RegistrationBudgetSpec } from '../../functions/core/registration-slots';
import { awsRateLimits } from '../sim/aws-limits';
import { FakeAwsAccount } from '../sim/fake-aws';
import { VirtualClock } from '../sim/virtual-clock';
import { median, percentile } from '../support/stats';
import {
  simulateBudgetFairness,
  simulateNamespaceBurst,
  simulateNodeChangeDuringBurst,
  type BudgetFairnessRun,
  type BurstRun,
  type NodeDuringBurstRun,
} from './propagation-bursts';
import { simulatePodTargets, type PodTargetsRun } from './propagation-pods';
import { instanceId, ourWorld, worldModel } from './propagation-world';

/** The world's constants, and the seed's: its loop and the calls it makes per LB Service. */
export const propagationModel = {
  ...worldModel,
  seed: {
    periodSeconds: 100,
    informerMs: 50,
    /** cloud-provider-aws UpdateLoadBalancer for one added node (docs/design.md §5). */
    callsPerLoadBalancer: [
      ['ec2', 'DescribeInstances'],
      ['elbv2', 'DescribeLoadBalancers'],
      ['ec2', 'DescribeSubnets'],
      ['ec2', 'DescribeRouteTables'],
      ['elbv2', 'DescribeLoadBalancers'],
      ['elbv2', 'DescribeLoadBalancers'],
      ['elbv2', 'DescribeListeners'],
      ['elbv2', 'DescribeTargetGroups'],
      ['elbv2', 'DescribeTargetHealth'],
      ['elbv2', 'DescribeTargetHealth'],
      ['elbv2', 'DescribeLoadBalancerAttributes'],
      ['elbv2', 'DescribeLoadBalancers'],
      ['ec2', 'DescribeSubnets'],
      ['ec2', 'DescribeSecurityGroups'],
      ['elbv2', 'RegisterTargets'],
      ['elbv2', 'RegisterTargets'],
    ] as const,
  },
} as const;

export interface OursRun {
  readonly services: number;
  readonly elbv2CallsPerSecond: number;
  readonly concurrency: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Per-Service completion times (ms after the node event), sorted. */
  readonly completionsMs: readonly number[];
  readonly elbv2Attempts: number;
  readonly throttledAttempts: number;
  readonly sdkRetries: number;
  /** Calls the SDK gave up on (the sync then backs off through SQS visibility). */
  readonly sdkGaveUp: number;
  readonly syncRetries: number;
  readonly invocations: number;
  readonly stateCalls: number;
  readonly kubeCalls: number;
  readonly simulatedSeconds: number;
  readonly wallMs: number;
  /** The shared registration budget the run had (none: per-process limiters only). */
  readonly budget?: RegistrationBudgetSpec | undefined;
  /** Conditional writes to the budget item (1 WRU each), and how many its condition refused. */
  readonly budgetWrites: number;
  readonly budgetRefused: number;
  /** Syncs that ended 'requeue-after' because the budget was booked past their lane's horizon. */
  readonly budgetRequeues: number;
}

export interface SeedRun {
  readonly services: number;
  /** Time of the serial loop, from its start to each Service's last RegisterTargets, sorted. */
  readonly loopMs: readonly number[];
  /** With the average wait for the 100 s tick (50 s). */
  readonly p50Ms: number;
  /** With the worst wait (100 s) and the whole loop. */
  readonly maxMs: number;
  readonly calls: number;
}

export interface PropagationResult {
  readonly model: typeof propagationModel;
  readonly rateLimits: typeof awsRateLimits;
  readonly ours: OursRun[];
  readonly oursLowBudget: OursRun[];
  readonly seed: SeedRun[];
  /**
   * Release 0.1's layout in the same run: node messages on the work queue, every host update
   * through it (issue 21 items 1 and 2 compare against it).
   */
  readonly oursSharedQueue?: OursRun[] | undefined;
  /** A node change 5 s into a 1,000-Service burst, with the node queue and without. */
  readonly nodeDuringBurst?:
    | { readonly nodeQueue: NodeDuringBurstRun; readonly sharedQueue: NodeDuringBurstRun }
    | undefined;
  /**
   * The shared registration budget against the per-process limiters it replaced (same run): one
   * node added on the largest count, and one node removed plus one added on it.
   */
  readonly registrationBudget?:
    | {
        readonly withBudget: OursRun;
        readonly perProcess: OursRun;
        readonly swap: { readonly withBudget: SwapRun; readonly perProcess: SwapRun };
      }
    | undefined;
  /** One quiet Service behind a 500-Service burst in another namespace, with and without fair queues. */
  readonly namespaceBurst?: { readonly fair: BurstRun; readonly unfair: BurstRun } | undefined;
  /**
   * One namespace toggling target-node-labels on its Services while a quiet Service in another
   * namespace registers a node: the shared budget first come, first served, and fair.
   */
  readonly budgetFairness?:
    { readonly fcfs: BudgetFairnessRun; readonly fair: BudgetFairnessRun } | undefined;
  /**
   * Issue 36: Services whose NLB targets pods, one endpoint of each turning ready; from then until
   * its target is registered (propagation-pods.ts).
   */
  readonly podTargets?: PodTargetsRun[] | undefined;
}

/**
 * Our pipeline for `services` LB Services, one node added; with the controller's default shared
 * registration budget unless `budget` says otherwise (null: per-process limiters only, as before).
 */
export async function simulateOurs(
  services: number,
  elbv2CallsPerSecond: number = propagationModel.elbv2CallsPerSecond,
  budget: RegistrationBudgetSpec | null = defaultRegistrationBudget,
  /** false: node messages share the work queue and every host update goes through it (0.1). */
  nodeQueue = true,
): Promise<OursRun> {
  const model = propagationModel;
  const started = performance.now();
  const world = ourWorld(
    Array.from({ length: services }, (_, i) => ({ namespace: `team-${i % 20}`, name: `svc-${i}` })),
    {
      elbv2CallsPerSecond,
      seed: services * 7919 + elbv2CallsPerSecond,
      fairQueue: true,
      budget: budget ?? undefined,
      nodeQueue,
    },
  );
  await world.ready();
  const { clock, account, table, kube, completions } = world;
  let stopped = false;
  const main = (async () => {
    const { work: stats, nodes: nodeStats } = world.startFunctions(() => stopped);
    // The node joins: the forwarder sees the watch event and sends one `node` message.
    kube.nodes = [...kube.nodes, world.added];
    await clock.sleep(model.watchMs);
    await world.nodeQueue.sendFromForwarder([{ v: 1, kind: 'node', reason: 'node added' }]);
    await world.done;
    stopped = true;
    return { invocations: stats.invocations + nodeStats.invocations, busyMs: stats.busyMs };
  })();
  const stats = await clock.run(main, 6 * 3600_000);
  const times = [...completions.values()].sort((a, b) => a - b);
  return {
    services,
    elbv2CallsPerSecond,
    concurrency: world.concurrency,
    p50Ms: median(times),
    p99Ms: percentile(times, 99),
    maxMs: times.at(-1) ?? Number.NaN,
    completionsMs: times,
    elbv2Attempts: account.stats.attempts,
    throttledAttempts: account.stats.throttled,
    sdkRetries: world.clients.reduce((n, c) => n + c.stats.retries, 0),
    sdkGaveUp: world.clients.reduce((n, c) => n + c.stats.exhausted, 0),
    syncRetries: world.metrics.counts.get('Retries') ?? 0,
    invocations: stats.invocations,
    stateCalls: table.stats.calls,
    kubeCalls: world.kubeCalls.calls,
    simulatedSeconds: clock.ms / 1000,
    wallMs: performance.now() - started,
    budget: budget ?? undefined,
    budgetWrites: world.budgetItem.stats.writes,
    budgetRefused: world.budgetItem.stats.refused,
    budgetRequeues: world.metrics.counts.get('Syncs.requeue-after') ?? 0,
  };
}

export interface SwapRun {
  readonly services: number;
  readonly budget?: RegistrationBudgetSpec | undefined;
  /** When the last NLB had dropped the removed node from all its target groups (ms). */
  readonly lastRemovalMs: number;
  /** When the last NLB had the added node in all its target groups (ms). */
  readonly lastAdditionMs: number;
  readonly removalP50Ms: number;
  readonly additionP50Ms: number;
  readonly elbv2Attempts: number;
  readonly throttledAttempts: number;
  readonly budgetRequeues: number;
  readonly wallMs: number;
}

/**
 * One node removed and one added in the same moment, on `services` LB Services: each Service's
 * host update then deregisters one instance and registers another in each target group (4
 * registration calls per Service). Removals matter more (the node is gone, or no longer eligible),
 * so they should all be done before the additions are.
 */
export async function simulateSwap(
  services: number,
  budget: RegistrationBudgetSpec | null = defaultRegistrationBudget,
): Promise<SwapRun> {
  const model = propagationModel;
  const started = performance.now();
  const world = ourWorld(
    Array.from({ length: services }, (_, i) => ({ namespace: `team-${i % 20}`, name: `svc-${i}` })),
    {
      elbv2CallsPerSecond: model.elbv2CallsPerSecond,
      seed: services * 7919 + 3,
      fairQueue: true,
      budget: budget ?? undefined,
    },
  );
  await world.ready();
  const { clock, account, kube, completions } = world;
  const removed = kube.nodes[0]!;
  const removedId = instanceId(1);
  const removals = new Map<string, number>();
  const onAdded = account.onTargetsChanged;
  account.onTargetsChanged = (tg) => {
    onAdded?.(tg);
    if (removals.has(tg.serviceKey)) return;
    const mine = [...account.targetGroups.values()].filter((g) => g.serviceKey === tg.serviceKey);
    if (mine.every((g) => !g.targets.has(removedId))) removals.set(tg.serviceKey, clock.ms);
  };
  let stopped = false;
  const main = (async () => {
    world.startFunctions(() => stopped);
    kube.nodes = [...kube.nodes.filter((n) => n !== removed), world.added];
    await clock.sleep(model.watchMs);
    await world.nodeQueue.sendFromForwarder([{ v: 1, kind: 'node', reason: 'nodes changed' }]);
    await world.done;
    stopped = true;
  })();
  await clock.run(main, 6 * 3600_000);
  const removalTimes = [...removals.values()].sort((a, b) => a - b);
  const additionTimes = [...completions.values()].sort((a, b) => a - b);
  return {
    services,
    budget: budget ?? undefined,
    lastRemovalMs: removalTimes.length === services ? removalTimes.at(-1)! : Number.NaN,
    lastAdditionMs: additionTimes.at(-1) ?? Number.NaN,
    removalP50Ms: median(removalTimes),
    additionP50Ms: median(additionTimes),
    elbv2Attempts: account.stats.attempts,
    throttledAttempts: account.stats.throttled,
    budgetRequeues: world.metrics.counts.get('Syncs.requeue-after') ?? 0,
    wallMs: performance.now() - started,
  };
}

/** The seed's loop over `services` LB Services, on the same buckets and latency. */
export async function simulateSeed(services: number): Promise<SeedRun> {
  const model = propagationModel;
  const clock = new VirtualClock();
  const account = new FakeAwsAccount(clock, model.latencyMs);
  const loop: number[] = [];
  await clock.run(
    (async () => {
      for (let i = 0; i < services; i++) {
        for (const [service, operation] of model.seed.callsPerLoadBalancer) {
          await account.patientCall(service, operation);
        }
        loop.push(clock.ms);
      }
    })(),
    24 * 3600_000,
  );
  const period = model.seed.periodSeconds * 1000;
  // wait.Until starts the period after the loop ends, so a cycle is loop + period long, and a
  // node change that lands during a loop waits for the rest of it and a period: the wait for the
  // next loop is uniform over the cycle on average ((L + P) / 2) and at worst a whole cycle.
  const loopLength = loop.at(-1) ?? 0;
  return {
    services,
    loopMs: loop,
    p50Ms: model.seed.informerMs + (loopLength + period) / 2 + median(loop),
    maxMs: model.seed.informerMs + loopLength + period + loopLength,
    calls: account.stats.attempts,
  };
}

export async function propagation(
  counts: readonly number[] = [1, 100, 1000],
  /** Service counts of the pod-target runs (issue 36 asks for 1 and 100). */
  podCounts: readonly number[] = [1, 100],
): Promise<PropagationResult> {
  const ours: OursRun[] = [];
  const oursSharedQueue: OursRun[] = [];
  const oursLowBudget: OursRun[] = [];
  const seed: SeedRun[] = [];
  for (const n of counts) {
    ours.push(await simulateOurs(n));
    oursSharedQueue.push(
      await simulateOurs(n, propagationModel.elbv2CallsPerSecond, defaultRegistrationBudget, false),
    );
    oursLowBudget.push(await simulateOurs(n, 4));
    seed.push(await simulateSeed(n));
  }
  const largest = counts.at(-1) ?? 1000;
  const registrationBudget = {
    withBudget: ours.at(-1)!,
    perProcess: await simulateOurs(largest, propagationModel.elbv2CallsPerSecond, null),
    swap: {
      withBudget: await simulateSwap(largest),
      perProcess: await simulateSwap(largest, null),
    },
  };
  const namespaceBurst = {
    fair: await simulateNamespaceBurst({ fair: true }),
    unfair: await simulateNamespaceBurst({ fair: false }),
  };
  const budgetFairness = {
    fcfs: await simulateBudgetFairness({ perNamespace: false }),
    fair: await simulateBudgetFairness({ perNamespace: true }),
  };
  const nodeDuringBurst = {
    nodeQueue: await simulateNodeChangeDuringBurst({ nodeQueue: true }),
    sharedQueue: await simulateNodeChangeDuringBurst({ nodeQueue: false }),
  };
  const podTargets: PodTargetsRun[] = [];
  for (const n of podCounts) podTargets.push(await simulatePodTargets(n));
  return {
    model: propagationModel,
    rateLimits: awsRateLimits,
    ours,
    oursSharedQueue,
    nodeDuringBurst,
    oursLowBudget,
    seed,
    registrationBudget,
    namespaceBurst,
    budgetFairness,
    podTargets,
  };
}
