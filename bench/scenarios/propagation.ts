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
 * calls each (DESIGN §5, counted from cloud-provider-aws), on the same buckets and latency.
 */
import { planNodeSync, type EligibleHosts } from '../../functions/core/node-sync-plan';
import type { Node, Service } from '../../functions/core/objects';
import { NlbProvider } from '../../functions/aws/nlb-provider';
import { SqsWorkQueue } from '../../functions/aws/sqs-work-queue';
import { toProviderState } from '../../functions/aws/nlb-state';
import { upstreamFinalizer, type ClaimPolicy } from '../../functions/core/claim';
import { parseConfig } from '../../functions/config';
import { eventSourceMaxConcurrency } from '../../functions/runtime/capacity';
import type { RuntimeContext, RuntimeLog, RuntimeMetrics } from '../../functions/runtime/context';
import { makeNode, makeService } from '../../test/support/core-objects';
import { CallLog, InMemoryKubernetes, RecordingEventRecorder } from '../../test/support/in-memory';
import { awsRateLimits } from '../sim/aws-limits';
import { FakeAwsAccount, FakeAwsClients } from '../sim/fake-aws';
import {
  FakeQueue,
  FakeStateTable,
  runEventSourceMapping,
  withLatency,
  type EsmOptions,
} from '../sim/fake-runtime';
import { seededRandom } from '../../test/support/seeded-random';
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
    /** cloud-provider-aws UpdateLoadBalancer for one added node (reference/aws-nlb-anchors.md §2.1 c). */
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
  count(name: string, value = 1): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + value);
  }
  milliseconds(): void {}
}

/** Our pipeline for `services` LB Services, one node added. */
export async function simulateOurs(
  services: number,
  elbv2CallsPerSecond: number = propagationModel.elbv2CallsPerSecond,
): Promise<OursRun> {
  const model = propagationModel;
  const started = performance.now();
  const clock = new VirtualClock();
  const random = seededRandom(services * 7919 + elbv2CallsPerSecond);
  const account = new FakeAwsAccount(clock, model.latencyMs);
  const queue = new FakeQueue(clock, model.latencyMs, model.queueVisibilityTimeoutSeconds);
  const table = new FakeStateTable(clock, model.latencyMs);
  const log = new CallLog();
  const kube = new InMemoryKubernetes(log);
  const kubeCalls = { calls: 0 };
  const events = new RecordingEventRecorder(log);
  const config = parseConfig({
    clusterName: 'bench',
    region: 'us-east-1',
    claimClassless: true,
    queueUrl: 'https://sqs.us-east-1.amazonaws.com/123456789012/work',
    tableName: 'state',
    elbv2CallsPerSecond,
    aws: { vpcId: 'vpc-0be0c0000000000000' },
    kubernetes: { mode: 'kubeconfig' },
  });

  kube.nodes = Array.from({ length: model.initialNodes }, (_, i) => nodeFor(i + 1));
  const initial: EligibleHosts = planNodeSync(kube.nodes, 'stable', undefined, []).eligible;
  table.seedEligibleHosts(initial);
  const initialIds = initial.hosts.map((h) => h.instanceId).sort();
  for (let i = 0; i < services; i++) {
    const service: Service = makeService({
      name: `svc-${i}`,
      namespace: `team-${i % 20}`,
      uid: `uid-${i}`,
      finalizers: [upstreamFinalizer],
    });
    kube.put(service);
    const key = `team-${i % 20}/svc-${i}`;
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
  }

  const added = nodeFor(model.initialNodes + 1);
  const addedId = instanceId(model.initialNodes + 1);
  const completions = new Map<string, number>();
  let allUpdated: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (allUpdated = resolve));
  account.onTargetsChanged = (tg) => {
    if (completions.has(tg.serviceKey)) return;
    const mine = [...account.targetGroups.values()].filter((g) => g.serviceKey === tg.serviceKey);
    if (mine.every((g) => g.targets.has(addedId))) {
      completions.set(tg.serviceKey, clock.ms);
      if (completions.size === services) allUpdated();
    }
  };

  const concurrency = eventSourceMaxConcurrency(elbv2CallsPerSecond);
  const metrics = new CountingMetrics();
  const clients: FakeAwsClients[] = [];
  const runtimes: RuntimeContext[] = Array.from({ length: concurrency }, (_, w) => {
    const aws = new FakeAwsClients(account, clock, random);
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
      base: {
        kube: withLatency(kube, clock, model.latencyMs, kubeCalls),
        provider,
        events: withLatency(events, clock, model.latencyMs, kubeCalls),
        clock,
        claim,
        nodePolicy: 'stable',
      },
      provider,
      store: table.asStore(),
      queue: new SqsWorkQueue(queue.asSqsClient(), config.queueUrl),
      log: quietLog,
      metrics,
      newOwner: () => `w${w}-${++passes}`,
    };
  });
  const esm: EsmOptions = {
    concurrency,
    batchSize: model.batchSize,
    batchingWindowMs: model.batchingWindowMs,
    invokeMs: model.invokeMs,
  };
  let stopped = false;
  const main = (async () => {
    const stats = runEventSourceMapping(queue, clock, runtimes, esm, () => stopped);
    // The node joins: the forwarder sees the watch event and sends one `node` message.
    kube.nodes = [...kube.nodes, added];
    await clock.sleep(model.watchMs);
    await queue.sendFromForwarder(JSON.stringify({ v: 1, kind: 'node', reason: 'node added' }));
    await done;
    stopped = true;
    return stats;
  })();
  const stats = await clock.run(main, 6 * 3600_000);
  const times = [...completions.values()].sort((a, b) => a - b);
  return {
    services,
    elbv2CallsPerSecond,
    concurrency,
    p50Ms: median(times),
    p99Ms: percentile(times, 99),
    maxMs: times.at(-1) ?? Number.NaN,
    completionsMs: times,
    elbv2Attempts: account.stats.attempts,
    throttledAttempts: account.stats.throttled,
    sdkRetries: clients.reduce((n, c) => n + c.stats.retries, 0),
    sdkGaveUp: clients.reduce((n, c) => n + c.stats.exhausted, 0),
    syncRetries: metrics.counts.get('Retries') ?? 0,
    invocations: stats.invocations,
    stateCalls: table.stats.calls,
    kubeCalls: kubeCalls.calls,
    simulatedSeconds: clock.ms / 1000,
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
  const oursLowBudget: OursRun[] = [];
  const seed: SeedRun[] = [];
  for (const n of counts) {
    ours.push(await simulateOurs(n));
    oursLowBudget.push(await simulateOurs(n, 4));
    seed.push(await simulateSeed(n));
  }
  return { model: propagationModel, rateLimits: awsRateLimits, ours, oursLowBudget, seed };
}
