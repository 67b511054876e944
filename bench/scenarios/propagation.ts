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
 */
import { planNodeSync, type EligibleHosts } from '../../functions/core/node-sync-plan';
import type { Node, Service } from '../../functions/core/objects';
import { targetNodeLabelsAnnotation } from '../../functions/core/target-node-labels';
import { NlbProvider } from '../../functions/nlb/nlb-provider';
import { SqsWorkQueue } from '../../functions/queue/sqs-work-queue';
import { toProviderState } from '../../functions/nlb/nlb-state';
import { upstreamFinalizer, type ClaimPolicy } from '../../functions/core/claim';
import { parseConfig } from '../../functions/contract/controller-config';
import { eventSourceMaxConcurrency } from '../../functions/contract/queue-limits';
import { processNodeBatch } from '../../functions/runtime/node-messages';
import type { RuntimeContext } from '../../functions/runtime/context';
import type { RuntimeLog, RuntimeMetrics } from '../../functions/runtime/ports';
import type { WorkMessage } from '../../functions/contract/work-messages';
import { makeNode, makeService } from '../../kit/core-objects';
import { CallLog, InMemoryKubernetes, RecordingEventRecorder } from '../../kit/in-memory';
import { awsRateLimits } from '../sim/aws-limits';
import { FakeAwsAccount, FakeAwsClients } from '../sim/fake-aws';
import { budgetOn, FakeTatItem } from '../sim/fake-budget';
import { defaultRegistrationBudget } from '../../functions/aws/registration-budget';
import { type RegistrationBudgetSpec } from '../../functions/core/registration-slots';
import {
  FakeQueue,
  FakeStateTable,
  runEventSourceMapping,
  withLatency,
  type EsmOptions,
} from '../sim/fake-runtime';
import { seededRandom } from '../../kit/seeded-random';
import { VirtualClock } from '../sim/virtual-clock';
import { median, percentile } from '../support/stats';

export const propagationModel = {
  latencyMs: 50,
  initialNodes: 3,
  portsPerService: 2,
  /** The deployment default (infra settings `elbv2CallsPerSecond`). */
  elbv2CallsPerSecond: 20,
  batchSize: 10,
  batchingWindowMs: 1000,
  /** Lambda invoke of a warm instance, and the watch event reaching the forwarder. */
  invokeMs: 50,
  watchMs: 50,
  queueVisibilityTimeoutSeconds: 360,
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
   * The shared registration budget against the per-process limiters it replaced (same run): one
   * node added on the largest count, and one node removed plus one added on it.
   */
  /**
   * Release 0.1's layout in the same run: node messages on the work queue, every host update
   * through it (issue 21 items 1 and 2 compare against it).
   */
  readonly oursSharedQueue?: OursRun[] | undefined;
  /** A node change 5 s into a 1,000-Service burst, with the node queue and without. */
  readonly nodeDuringBurst?:
    | { readonly nodeQueue: NodeDuringBurstRun; readonly sharedQueue: NodeDuringBurstRun }
    | undefined;
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
}

const claim: ClaimPolicy = {
  loadBalancerClass: 'serverless-service-controller.io/nlb',
  claimClassless: true,
};

function instanceId(n: number): string {
  return `i-${(0x0b00000000000000n + BigInt(n)).toString(16).padStart(17, '0')}`;
}

function nodeFor(n: number): Node {
  return makeNode(`ip-10-0-0-${n}.ec2.internal`, { instanceId: instanceId(n) });
}

const quietLog: RuntimeLog = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

class CountingMetrics implements RuntimeMetrics {
  readonly counts = new Map<string, number>();
  count(name: string, value = 1, dimensions?: Record<string, string>): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + value);
    // Syncs by outcome, e.g. `Syncs.requeue-after`: the budget's requeues.
    if (dimensions?.outcome !== undefined) {
      const named = `${name}.${dimensions.outcome}`;
      this.counts.set(named, (this.counts.get(named) ?? 0) + value);
    }
  }
  milliseconds(): void {}
}

interface SimService {
  readonly namespace: string;
  readonly name: string;
}

/**
 * Our runtime on virtual time, with `services` LB Services already synced to the initial nodes,
 * and the node that will be added. Every Service record, target group and Lambda instance is made
 * in the same order each time, so runs repeat exactly.
 */
function ourWorld(
  services: readonly SimService[],
  options: {
    elbv2CallsPerSecond: number;
    seed: number;
    fairQueue: boolean;
    /** The shared registration budget (the controller's default); undefined: none. */
    budget?: RegistrationBudgetSpec | undefined;
    /** false: the budget books first come, first served (before issue 32, finding 9). */
    budgetPerNamespace?: boolean;
    /**
     * Node messages on their own queue, consumed by the node-sync function, which runs small
     * fan-outs' host updates itself (default); false: release 0.1, one queue for everything and
     * every host update through it.
     */
    nodeQueue?: boolean;
  },
) {
  const model = propagationModel;
  const clock = new VirtualClock();
  const random = seededRandom(options.seed);
  const account = new FakeAwsAccount(clock, model.latencyMs);
  const queue = new FakeQueue(clock, model.latencyMs, model.queueVisibilityTimeoutSeconds, {
    fair: options.fairQueue,
  });
  const separateNodeQueue = options.nodeQueue !== false;
  const nodeQueue = separateNodeQueue
    ? new FakeQueue(clock, model.latencyMs, model.queueVisibilityTimeoutSeconds, { fair: false })
    : queue;
  const table = new FakeStateTable(clock, model.latencyMs);
  const budgetItem = new FakeTatItem(clock, model.latencyMs);
  const log = new CallLog();
  const kube = new InMemoryKubernetes(log);
  const kubeCalls = { calls: 0 };
  const events = new RecordingEventRecorder(log);
  const config = parseConfig({
    clusterName: 'bench',
    region: 'us-east-1',
    claimClassless: true,
    queueUrl: 'https://sqs.us-east-1.amazonaws.com/123456789012/work',
    ...(separateNodeQueue
      ? { nodeQueueUrl: 'https://sqs.us-east-1.amazonaws.com/123456789012/nodes' }
      : { directHostUpdates: 0 }),
    tableName: 'state',
    elbv2CallsPerSecond: options.elbv2CallsPerSecond,
    aws: { vpcId: 'vpc-0be0c0000000000000' },
    kubernetes: { mode: 'kubeconfig' },
  });

  kube.nodes = Array.from({ length: model.initialNodes }, (_, i) => nodeFor(i + 1));
  const initial: EligibleHosts = planNodeSync(kube.nodes, 'stable', undefined, []).eligible;
  table.seedEligibleHosts(initial);
  const initialIds = initial.hosts.map((h) => h.instanceId).sort();
  services.forEach(({ namespace, name }, i) => {
    const service: Service = makeService({
      name,
      namespace,
      uid: `uid-${i}`,
      finalizers: [upstreamFinalizer],
    });
    kube.put(service);
    const key = `${namespace}/${name}`;
    const lb = `arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/k8s-${i}/${i}`;
    const groups = [80, 443].slice(0, model.portsPerService).map((port) => ({
      key: `${port}/TCP`,
      arn: `arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-${i}-${port}/${i}`,
      name: `k8s-${i}-${port}`,
    }));
    for (const tg of groups) {
      account.addTargetGroup({
        arn: tg.arn,
        serviceKey: key,
        serviceUid: `uid-${i}`,
        loadBalancerArn: lb,
        targets: initialIds,
      });
    }
    table.seed({
      key,
      uid: `uid-${i}`,
      snapshot: service,
      provider: toProviderState({
        loadBalancerArn: lb,
        loadBalancerName: `k8s-${i}`,
        dnsName: `k8s-${i}.elb.us-east-1.amazonaws.com`,
        securityGroupId: `sg-${i}`,
        targetGroups: Object.fromEntries(
          groups.map((tg) => [tg.key, { arn: tg.arn, name: tg.name, targets: initialIds }]),
        ),
      }),
      status: { ingress: [{ hostname: `k8s-${i}.elb.us-east-1.amazonaws.com` }] },
      hostsHash: initial.hash,
      updatedAt: clock.now().toISOString(),
    });
  });

  const added = nodeFor(model.initialNodes + 1);
  const addedId = instanceId(model.initialNodes + 1);
  /** When each Service's NLB had the added node in all its target groups (virtual ms). */
  const completions = new Map<string, number>();
  let allUpdated: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (allUpdated = resolve));
  account.onTargetsChanged = (tg) => {
    if (completions.has(tg.serviceKey)) return;
    const mine = [...account.targetGroups.values()].filter((g) => g.serviceKey === tg.serviceKey);
    if (mine.every((g) => g.targets.has(addedId))) {
      completions.set(tg.serviceKey, clock.ms);
      if (completions.size === services.length) allUpdated();
    }
  };

  const concurrency = eventSourceMaxConcurrency(options.elbv2CallsPerSecond);
  const metrics = new CountingMetrics();
  const clients: FakeAwsClients[] = [];
  const makeRuntime = (w: number): RuntimeContext => {
    const aws = new FakeAwsClients(
      account,
      clock,
      random,
      options.budget &&
        budgetOn(budgetItem, options.budget, clock, options.budgetPerNamespace !== false),
    );
    clients.push(aws);
    const provider = new NlbProvider(aws.asNlbClients(), {
      clusterName: config.clusterName,
      vpcId: config.aws.vpcId,
      defaultScheme: 'internal',
      defaultSslPolicy: config.aws.defaultSslPolicy,
      defaultTags: {},
    });
    let passes = 0;
    return {
      config,
      syncDeps: {
        kube: withLatency(kube, clock, model.latencyMs, kubeCalls),
        provider,
        events: withLatency(events, clock, model.latencyMs, kubeCalls),
        clock,
        claim,
        nodePolicy: 'stable',
      },
      provider,
      store: table,
      queue: new SqsWorkQueue(queue.asSqsClient(), config.queueUrl),
      nodeQueue: new SqsWorkQueue(nodeQueue.asSqsClient(), config.nodeQueueUrl ?? config.queueUrl),
      separateNodeQueue,
      log: quietLog,
      metrics,
      newOwner: () => `w${w}-${++passes}`,
    };
  };
  const runtimes = Array.from({ length: concurrency }, (_, w) => makeRuntime(w));
  // The node-sync function: its event source mapping's smallest maximum concurrency, 2.
  const nodeRuntimes = separateNodeQueue
    ? Array.from({ length: 2 }, (_, w) => makeRuntime(concurrency + w))
    : [];
  const nodeEsm: EsmOptions = {
    concurrency: nodeRuntimes.length,
    batchSize: model.batchSize,
    batchingWindowMs: 0,
    invokeMs: model.invokeMs,
  };
  const esm: EsmOptions = {
    concurrency,
    batchSize: model.batchSize,
    batchingWindowMs: model.batchingWindowMs,
    invokeMs: model.invokeMs,
  };
  /** Both functions' event source mappings: service-sync's on the work queue, node-sync's on the node queue. */
  const startFunctions = (stopped: () => boolean) => ({
    work: runEventSourceMapping(queue, clock, runtimes, esm, stopped),
    nodes: runEventSourceMapping(
      nodeQueue,
      clock,
      nodeRuntimes,
      nodeEsm,
      stopped,
      processNodeBatch,
    ),
  });
  return {
    startFunctions,
    clock,
    account,
    queue,
    nodeQueue,
    nodeRuntimes,
    nodeEsm,
    table,
    budgetItem,
    kube,
    kubeCalls,
    initial,
    added,
    completions,
    done,
    concurrency,
    metrics,
    clients,
    runtimes,
    esm,
  };
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
  const model = propagationModel;
  const services: SimService[] = [
    ...Array.from({ length: burstServices }, (_, i) => ({ namespace: 'burst', name: `svc-${i}` })),
    { namespace: 'quiet', name: 'web' },
  ];
  const world = ourWorld(services, {
    elbv2CallsPerSecond: model.elbv2CallsPerSecond,
    seed: burstServices * 7919 + 1,
    fairQueue: options.fair,
  });
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
  const model = propagationModel;
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
  const model = propagationModel;
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
  };
}
