/**
 * The world the propagation simulations run our design in (propagation.ts, propagation-bursts.ts):
 * the real runtime on virtual time over in-memory fakes, with LB Services already synced to the
 * initial nodes.
 */
import { planNodeSync, type EligibleHosts } from '../../functions/core/node-sync-plan';
import type { Node, Service } from '../../functions/core/objects';
import { NlbProvider } from '../../functions/nlb/nlb-provider';
import { SqsWorkQueue } from '../../functions/queue/sqs-work-queue';
import type { NlbClients } from '../../functions/aws/clients';
import { upstreamFinalizer, type ClaimPolicy } from '../../functions/core/claim';
import { parseConfig } from '../../functions/contract/controller-config';
import { eventSourceMaxConcurrency } from '../../functions/contract/queue-limits';
import { processNodeBatch } from '../../functions/runtime/node-messages';
import type { RuntimeContext } from '../../functions/runtime/context';
import type { RuntimeLog, RuntimeMetrics } from '../../functions/runtime/ports';
import { makeNode, makeService } from '../../kit/core-objects';
import { CallLog, InMemoryKubernetes, RecordingEventRecorder } from '../../kit/in-memory';
import { FakeAwsAccount, FakeAwsClients } from '../sim/fake-aws';
import { budgetOn, FakeTatItem } from '../sim/fake-budget';
import {
  defaultChangeBudget,
  defaultDescribeBudget,
} from '../../functions/aws/registration-budget';
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
import { LambdaMeter } from '../sim/meter';
import { Release01Clients } from '../sim/release-01-clients';

/**
 * The simulated world's constants, shared by every run on it; the seed's own (its loop and the
 * calls it makes) are added in propagation.ts.
 */
export const worldModel = {
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
} as const;

const claim: ClaimPolicy = {
  loadBalancerClass: 'serverless-service-controller.io/nlb',
  claimClassless: true,
};

export function instanceId(n: number): string {
  return `i-${(0x0b00000000000000n + BigInt(n)).toString(16).padStart(17, '0')}`;
}

export function nodeFor(n: number): Node {
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

export interface SimService {
  readonly namespace: string;
  readonly name: string;
}

/**
 * Our runtime on virtual time, with `services` LB Services already synced to the initial nodes,
 * and the node that will be added. Each function instance has its own view of the state table
 * (its own host-set chunk cache, as DynamoStateStore keeps); the node-sync function's instances
 * start with the current set cached, as the timer's tick (every 100 s) leaves them. Every Service record, target group and Lambda instance is made
 * in the same order each time, so runs repeat exactly.
 */
export function ourWorld(
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
     * With a budget, the fleet's Describe and change budgets too, at the controller's defaults
     * (the default); false: registrations only, as before issue 37's bursts.
     */
    fleetBudgets?: boolean;
    /**
     * Node messages on their own queue, consumed by the node-sync function, which runs small
     * fan-outs' host updates itself (default); false: release 0.1, one queue for everything and
     * every host update through it.
     */
    nodeQueue?: boolean;
    /**
     * Release 0.1's layout as a whole (issue 37's cost comparison): besides the shared queue and
     * no budget, each Service's lease on its record item, and 0.1's clients (a sleeping
     * per-process limiter and the SDK's adaptive retries, bench/sim/release-01-clients.ts).
     */
    release01?: boolean;
    /** false: the Services exist in the API server only, with nothing in AWS or the table yet. */
    synced?: boolean;
  },
) {
  const model = worldModel;
  const clock = new VirtualClock();
  const random = seededRandom(options.seed);
  const meter = new LambdaMeter(clock);
  const account = new FakeAwsAccount(clock, model.latencyMs);
  const release01 = options.release01 === true;
  const queue = new FakeQueue(clock, model.latencyMs, model.queueVisibilityTimeoutSeconds, {
    fair: options.fairQueue,
    meter,
  });
  const separateNodeQueue = options.nodeQueue !== false && !release01;
  const nodeQueue = separateNodeQueue
    ? new FakeQueue(clock, model.latencyMs, model.queueVisibilityTimeoutSeconds, {
        fair: false,
        meter,
      })
    : queue;
  const table = new FakeStateTable(clock, model.latencyMs, { leaseOnRecord: release01 }, meter);
  const budgetItem = new FakeTatItem(clock, model.latencyMs, meter);
  const describeItem = new FakeTatItem(clock, model.latencyMs, meter);
  const changeItem = new FakeTatItem(clock, model.latencyMs, meter);
  const budget = release01 ? undefined : options.budget;
  const fleet = budget !== undefined && options.fleetBudgets !== false;
  const perNamespace = options.budgetPerNamespace !== false;
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
  const providerSettings = {
    clusterName: config.clusterName,
    vpcId: config.aws.vpcId,
    defaultScheme: 'internal' as const,
    defaultSslPolicy: config.aws.defaultSslPolicy,
    defaultTags: {},
  };
  // The cluster's VPC, for NLBs the simulation creates.
  account.addSubnets(config.aws.vpcId);
  const toSeed: { readonly service: Service; readonly key: string }[] = [];
  services.forEach(({ namespace, name }, i) => {
    if (options.synced === false) {
      kube.put(makeService({ name, namespace, uid: `uid-${i}` }));
      return;
    }
    const service: Service = makeService({
      name,
      namespace,
      uid: `uid-${i}`,
      finalizers: [upstreamFinalizer],
    });
    kube.put(service);
    toSeed.push({ service, key: `${namespace}/${name}` });
  });
  /**
   * The synced Services' NLBs, made by the provider itself (so a full sync of one is a drift
   * check, not a create), on the clock before it is rewound to 0, without AWS's buckets, and
   * their records as a clean pass leaves them.
   */
  const seedSynced = async () => {
    if (toSeed.length === 0) return;
    const direct = (service: 'elbv2' | 'ec2' | 'tagging') => ({
      send: (command: object) => account.attempt(service, command),
    });
    const seeder = new NlbProvider(
      {
        elbv2: direct('elbv2') as unknown as NlbClients['elbv2'],
        ec2: direct('ec2') as unknown as NlbClients['ec2'],
        tagging: direct('tagging') as unknown as Exclude<NlbClients['tagging'], () => unknown>,
      },
      providerSettings,
    );
    account.unlimited = true;
    await clock.run(
      (async () => {
        for (const { service, key } of toSeed) {
          const ensured = await seeder.ensureLoadBalancer(service, initial.hosts, undefined);
          const status = { ingress: ensured.status.ingress ?? [] };
          kube.put({ ...service, status: { loadBalancer: status } });
          table.seed({
            key,
            uid: service.metadata?.uid ?? '',
            snapshot: service,
            provider: ensured.state,
            status,
            hostsHash: initial.hash,
            updatedAt: clock.now().toISOString(),
          });
        }
      })(),
      24 * 3600_000,
    );
    account.unlimited = false;
    // The clock first: the buckets start full at its new 0.
    clock.rewind();
    account.restart();
  };

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
  const clients: (FakeAwsClients | Release01Clients)[] = [];
  const providers: NlbProvider[] = [];
  const makeRuntime = (w: number, warm = false): RuntimeContext => {
    const aws = release01
      ? new Release01Clients(account, clock, random)
      : new FakeAwsClients(
          account,
          clock,
          random,
          budget === undefined
            ? {}
            : {
                registration: budgetOn(budgetItem, budget, clock, perNamespace),
                ...(fleet
                  ? {
                      // As createRuntime builds it: off unless its rate is set.
                      ...(defaultDescribeBudget.perSecond > 0
                        ? {
                            describe: budgetOn(
                              describeItem,
                              defaultDescribeBudget,
                              clock,
                              // First come, first served, as createRuntime builds it.
                              false,
                              'ELBv2 Describe budget',
                            ),
                          }
                        : {}),
                      ...(defaultChangeBudget.perSecond > 0
                        ? {
                            change: budgetOn(
                              changeItem,
                              defaultChangeBudget,
                              clock,
                              perNamespace,
                              'ELBv2 change budget',
                            ),
                          }
                        : {}),
                    }
                  : {}),
              },
        );
    clients.push(aws);
    const provider = new NlbProvider(aws.asNlbClients(), providerSettings);
    providers.push(provider);
    let passes = 0;
    return {
      config,
      syncDeps: {
        kube: withLatency(kube, clock, model.latencyMs, kubeCalls, meter),
        provider,
        events: withLatency(events, clock, model.latencyMs, kubeCalls, meter),
        clock,
        claim,
        nodePolicy: 'stable',
      },
      provider,
      store: table.instanceView(warm),
      queue: new SqsWorkQueue(queue.asSqsClient(), config.queueUrl),
      nodeQueue: new SqsWorkQueue(nodeQueue.asSqsClient(), config.nodeQueueUrl ?? config.queueUrl),
      separateNodeQueue,
      log: quietLog,
      metrics,
      newOwner: () => `w${w}-${++passes}`,
      random,
    };
  };
  const runtimes = Array.from({ length: concurrency }, (_, w) => makeRuntime(w));
  // The node-sync function: its event source mapping's smallest maximum concurrency, 2.
  const nodeRuntimes = separateNodeQueue
    ? Array.from({ length: 2 }, (_, w) => makeRuntime(concurrency + w, true))
    : [];
  const nodeEsm: EsmOptions = {
    concurrency: nodeRuntimes.length,
    batchSize: model.batchSize,
    batchingWindowMs: 0,
    invokeMs: model.invokeMs,
    meter,
  };
  const esm: EsmOptions = {
    concurrency,
    batchSize: model.batchSize,
    batchingWindowMs: model.batchingWindowMs,
    invokeMs: model.invokeMs,
    meter,
  };
  // Every AWS attempt a function makes is time in a call (its limiter's and retries' waits are not).
  const attempt = account.attempt.bind(account);
  account.attempt = (service, command) => meter.call(() => attempt(service, command), 'sync');
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
    /** The Describe and change budgets' items (writes only when `fleetBudgets`). */
    fleetItems: [describeItem, changeItem] as const,
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
    meter,
    config,
    /**
     * Settles once the synced Services' NLBs are made and every instance's provider has loaded
     * the tagging API (deletions use it): await it before the clock runs.
     */
    ready: async () => {
      await Promise.all(providers.map((p) => p.loadTaggingApi()));
      await seedSynced();
    },
  };
}
