/**
 * Cost on the virtual clock (issue 37): the real runtime over the bench fakes (50 ms per remote
 * call, AWS's token buckets), one Service's life in bursts of 1, 50 and 1,000 Services: created,
 * a node added, updated (a health-check annotation), deleted. Each phase runs until every Service
 * has converged and both queues are empty, so what comes back later (requeues, kept slots) is in
 * its bill. Lambda is billed on the meter's handler time (bench/sim/meter.ts), SQS per request,
 * DynamoDB per request unit (bench/sim/fake-runtime.ts), at the prices of cost.ts. The same run
 * prices release 0.1's layout: one queue, no registration budget, the lease on the record item,
 * and 0.1's clients (a sleeping limiter and the SDK's adaptive retries).
 *
 * Figures here do not move with the machine: unlike the throughput run (moto's wall time), the
 * simulation's time is virtual.
 */
import type { WorkMessage } from '../../functions/contract/work-messages';
import { defaultRegistrationBudget } from '../../functions/aws/registration-budget';
import { awsRateLimits, bucketFor, type BucketName } from '../sim/aws-limits';
import type { FakeTargetGroup } from '../sim/fake-aws-resources';
import { median } from '../support/stats';
import { prices } from './cost';
import { nodeFor, ourWorld, worldModel, instanceId } from './propagation-world';

export type LifecyclePhase = 'create' | 'node change' | 'update' | 'delete';
export type Layout = 'today' | 'release 0.1';

export interface PhaseBill {
  readonly phase: LifecyclePhase;
  readonly layout: Layout;
  readonly services: number;
  /** From the phase's first message to each Service converged (ms), sorted. */
  readonly convergedMs: readonly number[];
  readonly p50Ms: number;
  readonly maxMs: number;
  /** Until the queues were empty too. */
  readonly drainedMs: number;
  readonly invocations: number;
  readonly gbSeconds: number;
  readonly waitingShare: number;
  readonly sqsRequests: number;
  readonly wru: number;
  readonly rru: number;
  readonly elbv2Ec2Attempts: number;
  readonly throttled: number;
  readonly byOperation: Readonly<Record<string, number>>;
  /** Dollars per million events (an event: one Service's create, update or delete; a host update). */
  readonly perMillion: number;
  /** The same for what no layout of the state and the queues avoids (`layoutFloor`). */
  readonly floorPerMillion: number;
}

const healthCheckInterval = 'service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval';

interface Counters {
  invocations: number;
  billedMs: number;
  syncMs: number;
  waitingMs: number;
  sqs: number;
  wru: number;
  rru: number;
  attempts: number;
  throttled: number;
  byOperation: Record<string, number>;
}

type World = ReturnType<typeof ourWorld>;

/** A phase's run: until every Service converged and both queues are empty, billed apart. */
function phaseRunner(
  world: World,
  serviceKeys: readonly string[],
  layout: Layout,
  /** Called before each convergence check of every key. */
  beforeCheck: () => void = () => undefined,
) {
  const { clock, account, table, meter, queue, nodeQueue, budgetItem } = world;
  const counters = (): Counters => {
    const queues = queue === nodeQueue ? [queue] : [queue, nodeQueue];
    return {
      invocations: meter.totals.invocations,
      billedMs: meter.totals.billedMs,
      syncMs: meter.totals.syncMs,
      waitingMs: meter.totals.waitingMs,
      sqs: queues.reduce(
        (n, q) =>
          n + q.stats.sends + q.stats.receives + q.stats.deletes + q.stats.visibilityChanges,
        0,
      ),
      wru:
        table.stats.wru +
        budgetItem.stats.writes +
        world.fleetItems.reduce((n, item) => n + item.stats.writes, 0),
      rru: table.stats.rru,
      attempts: account.stats.attempts,
      throttled: account.stats.throttled,
      byOperation: { ...account.stats.byOperation },
    };
  };
  return async (
    name: LifecyclePhase,
    send: () => Promise<void>,
    converged: (key: string) => boolean,
  ): Promise<PhaseBill> => {
    const before = counters();
    const started = clock.ms;
    await send();
    const done = new Map<string, number>();
    for (;;) {
      beforeCheck();
      for (const key of serviceKeys) {
        if (!done.has(key) && converged(key)) done.set(key, clock.ms - started);
      }
      if (done.size === serviceKeys.length && queue.depth === 0 && nodeQueue.depth === 0) break;
      await clock.sleep(100);
    }
    const after = counters();
    const times = [...done.values()].sort((a, b) => a - b);
    const byOperation: Record<string, number> = {};
    for (const [op, n] of Object.entries(after.byOperation)) {
      const delta = n - (before.byOperation[op] ?? 0);
      if (delta > 0) byOperation[op] = delta;
    }
    const billedMs = after.billedMs - before.billedMs;
    const bill = {
      invocations: after.invocations - before.invocations,
      gbSeconds: (billedMs / 1000) * (meter.memoryMiB / 1024),
      sqsRequests: after.sqs - before.sqs,
      wru: after.wru - before.wru,
      rru: after.rru - before.rru,
    };
    return {
      phase: name,
      layout,
      services: serviceKeys.length,
      convergedMs: times,
      p50Ms: median(times),
      maxMs: times.at(-1) ?? Number.NaN,
      drainedMs: clock.ms - started,
      ...bill,
      waitingShare: billedMs === 0 ? 0 : (after.waitingMs - before.waitingMs) / billedMs,
      elbv2Ec2Attempts: after.attempts - before.attempts,
      throttled: after.throttled - before.throttled,
      byOperation,
      perMillion: perMillion(bill, serviceKeys.length),
      floorPerMillion: perMillion(
        layoutFloor(name, serviceKeys.length, after.syncMs - before.syncMs, meter.memoryMiB),
        serviceKeys.length,
      ),
    };
  };
}

/** One Service's life in a burst of `services`, in one world: four phases, each billed apart. */
export async function simulateLifecycle(services: number, layout: Layout): Promise<PhaseBill[]> {
  const keys = Array.from({ length: services }, (_, i) => ({
    namespace: `team-${i % 20}`,
    name: `svc-${i}`,
  }));
  const world = ourWorld(keys, {
    elbv2CallsPerSecond: worldModel.elbv2CallsPerSecond,
    seed: services * 7919 + (layout === 'today' ? 37 : 1),
    fairQueue: true,
    budget: defaultRegistrationBudget,
    release01: layout === 'release 0.1',
    synced: false,
  });
  const { clock, account, kube, table, queue, nodeQueue } = world;
  const serviceKeys = keys.map((k) => `${k.namespace}/${k.name}`);
  // The target groups by Service, indexed once per convergence check: a scan per key made a
  // 1,000-Service phase quadratic (hours of wall time).
  const groupsByKey = new Map<string, FakeTargetGroup[]>();
  const indexGroups = () => {
    groupsByKey.clear();
    for (const tg of account.targetGroups.values()) {
      const groups = groupsByKey.get(tg.serviceKey);
      if (groups === undefined) groupsByKey.set(tg.serviceKey, [tg]);
      else groups.push(tg);
    }
  };
  const phase = phaseRunner(world, serviceKeys, layout, indexGroups);
  const groupsOf = (key: string): readonly FakeTargetGroup[] => groupsByKey.get(key) ?? [];
  const hasTargets = (key: string, nodes: number) => {
    const ids = Array.from({ length: nodes }, (_, i) => instanceId(i + 1));
    const groups = groupsOf(key);
    return groups.length === 2 && groups.every((tg) => ids.every((id) => tg.targets.has(id)));
  };
  const sendServices = async () => {
    for (let i = 0; i < serviceKeys.length; i += 10) {
      const batch = serviceKeys.slice(i, i + 10);
      await queue.sendFromForwarder(
        batch.map((key): WorkMessage => ({ v: 1, kind: 'service', key })),
      );
    }
  };
  const nodes = worldModel.initialNodes;
  await world.ready();
  let stopped = false;
  const main = (async () => {
    world.startFunctions(() => stopped);
    const bills = [
      await phase('create', sendServices, (key) => {
        const [namespace, name] = key.split('/') as [string, string];
        const ingress = kube.stored(namespace, name)?.status?.loadBalancer?.ingress ?? [];
        return ingress.length > 0 && hasTargets(key, nodes);
      }),
      await phase(
        'node change',
        async () => {
          kube.nodes = [...kube.nodes, nodeFor(nodes + 1)];
          await clock.sleep(worldModel.watchMs);
          await nodeQueue.sendFromForwarder([{ v: 1, kind: 'node', reason: 'node added' }]);
        },
        (key) => hasTargets(key, nodes + 1),
      ),
      await phase(
        'update',
        async () => {
          for (const { namespace, name } of keys) {
            const live = kube.stored(namespace, name)!;
            kube.put({
              ...live,
              metadata: { ...live.metadata, annotations: { [healthCheckInterval]: '30' } },
            });
          }
          await sendServices();
        },
        (key) =>
          groupsOf(key).every((tg) => tg.created?.healthCheck.HealthCheckIntervalSeconds === 30),
      ),
      await phase(
        'delete',
        async () => {
          for (const { namespace, name } of keys) kube.remove(namespace, name);
          await sendServices();
        },
        (key) => groupsOf(key).length === 0 && table.record(key) === undefined,
      ),
    ];
    stopped = true;
    return bills;
  })();
  return clock.run(main, 24 * 3600_000);
}

/**
 * A lower bound of a phase's bill for any layout of the state and the queues running this sync
 * code (issue 37: the goal's ratio compares two layouts of the same code): the Lambda time in
 * which the sync's own calls (ELBv2, EC2, Kubernetes) were in flight, as this run made them, and
 * per invocation two 50 ms state calls: the key's lease taken with its record read, and the
 * record written as the lease is released (one item, as release 0.1 kept it). One invocation per
 * batch of 10 events, and its three SQS requests (the forwarder's send, the receive, the delete);
 * a node change is one message, whose invocation runs every host update. Per event the item's
 * two writes (a small record: 1 unit each) and no read beyond them.
 */
export function layoutFloor(
  phase: LifecyclePhase,
  events: number,
  syncMs: number,
  memoryMiB: number,
): {
  readonly invocations: number;
  readonly gbSeconds: number;
  readonly sqsRequests: number;
  readonly wru: number;
  readonly rru: number;
} {
  const batches = phase === 'node change' ? 1 : Math.ceil(events / worldModel.batchSize);
  const ms = syncMs + 2 * worldModel.latencyMs * batches;
  return {
    invocations: batches,
    gbSeconds: (ms / 1000) * (memoryMiB / 1024),
    sqsRequests: 3 * batches,
    wru: 2 * events,
    rru: 0,
  };
}

function perMillion(
  bill: {
    readonly invocations: number;
    readonly gbSeconds: number;
    readonly sqsRequests: number;
    readonly wru: number;
    readonly rru: number;
  },
  events: number,
): number {
  return (
    (1_000_000 / events) *
    (bill.sqsRequests * prices.sqsPerRequest +
      bill.invocations * prices.lambdaPerRequest +
      bill.gbSeconds * prices.lambdaArmPerGbSecond +
      bill.wru * prices.dynamoPerWru +
      bill.rru * prices.dynamoPerRru)
  );
}

/**
 * The least time `services` creates take on AWS's buckets: for each bucket, the calls one create
 * makes of it (from a measured create, `perService`) for every Service, less the bucket's burst,
 * at its refill rate; the slowest bucket is the floor.
 */
export function createFloorMs(
  perService: Readonly<Record<string, number>>,
  services: number,
): { readonly ms: number; readonly bucket: BucketName } {
  const calls = new Map<BucketName, number>();
  for (const [operation, count] of Object.entries(perService)) {
    const service =
      /^(Describe(Subnets|SecurityGroups)|CreateSecurityGroup|AuthorizeSecurityGroupIngress|RevokeSecurityGroupIngress|DeleteSecurityGroup|CreateTags|DeleteTags)$/.test(
        operation,
      )
        ? 'ec2'
        : operation === 'GetResources'
          ? 'tagging'
          : 'elbv2';
    if (service === 'tagging') continue;
    const bucket = bucketFor(service, operation);
    calls.set(bucket, (calls.get(bucket) ?? 0) + count * services);
  }
  let floor = { ms: 0, bucket: 'elbv2Other' as BucketName };
  for (const [bucket, total] of calls) {
    const spec = awsRateLimits[bucket];
    const ms = (Math.max(0, total - spec.capacity) / spec.refillPerSecond) * 1000;
    if (ms > floor.ms) floor = { ms, bucket };
  }
  return floor;
}

export interface CostSimResult {
  readonly bursts: readonly number[];
  readonly bills: readonly PhaseBill[];
  /** The 1,000-Service create burst against the floor AWS's buckets give (issue 37, item 3). */
  readonly restore?: { readonly floorMs: number; readonly floorBucket: BucketName } | undefined;
}

export async function costSim(bursts: readonly number[] = [1, 50]): Promise<CostSimResult> {
  const bills: PhaseBill[] = [];
  for (const services of bursts) {
    for (const layout of ['today', 'release 0.1'] as const) {
      bills.push(...(await simulateLifecycle(services, layout)));
    }
  }
  const one = bills.find((b) => b.phase === 'create' && b.layout === 'today' && b.services === 1);
  const largest = Math.max(...bursts);
  const floor = one === undefined ? undefined : createFloorMs(one.byOperation, largest);
  return {
    bursts,
    bills,
    ...(floor === undefined ? {} : { restore: { floorMs: floor.ms, floorBucket: floor.bucket } }),
  };
}
