/**
 * Pod-target propagation (issue 36): from an endpoint becoming ready until its target is
 * registered, for Services whose NLB targets pods (`nlb-target-type: ip`), on the world of
 * propagation-world.ts: the real runtime on virtual time over the bench fakes, the same latency,
 * queues, event source mappings, registration budget and AWS token buckets as the node runs.
 *
 * Every Service is already created and in sync: one pod target group (TargetType ip) per port
 * holding its ready pods, and the record a full sync leaves (checkpoint, endpoints digest, the
 * recorded groups). At t0 one more pod of every Service becomes ready (its EndpointSlice changes);
 * the forwarder sees each slice's watch event and sends one `targets` message per Service to the
 * work queue, 10 to a SendMessageBatch, one call after another, as for Service messages in
 * propagation-bursts.ts (the publisher has no batching window of its own; the work function's
 * event source mapping has its 1 s one). The work function runs processWorkBatch → processKey →
 * syncTargets → NlbProvider.updateEndpointTargets. A Service is done when RegisterTargets has put
 * the new pod's ip:port in each of its target groups.
 */
import { defaultRegistrationBudget } from '../../functions/aws/registration-budget';
import { upstreamFinalizer } from '../../functions/core/claim';
import { endpointsDigest, type EndpointSliceView } from '../../functions/core/endpoint-targets';
import type { WorkMessage } from '../../functions/contract/work-messages';
import { toProviderState } from '../../functions/nlb/nlb-state';
import type { SyncDependencies } from '../../functions/sync/dependencies';
import { podTargetsCheckpoint } from '../../functions/sync/pod-targets';
import { makeService } from '../../kit/core-objects';
import { median, percentile } from '../support/stats';
import { ourWorld, worldModel, type SimService } from './propagation-world';

/** The scenario's constants (printed in the report). */
export const podTargetsModel = {
  /** Ready pods per Service before t0, registered in its target groups. */
  readyPodsBefore: 3,
  /** Service port → the pods' port, named as the slices name them; `portsPerService` of them. */
  ports: [
    { name: 'http', port: 80, targetPort: 8080 },
    { name: 'https', port: 443, targetPort: 8443 },
  ].slice(0, worldModel.portsPerService),
} as const;

export interface PodTargetsRun {
  readonly services: number;
  /** From t0 (the endpoint ready) until each Service's new pod was in all its target groups. */
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly elbv2Attempts: number;
  readonly throttledAttempts: number;
  /** ELBv2 attempts by operation, over the whole run. */
  readonly elbv2ByOperation: Readonly<Record<string, number>>;
  readonly throttledByOperation: Readonly<Record<string, number>>;
  /**
   * Passes the runtime ran (the Syncs metric): one targets sync per Service, and one more for each
   * pass the registration budget sent back (`budgetRequeues`). The call counts are whole passes':
   * the run goes on until the work queue is empty.
   */
  readonly syncs: number;
  readonly syncRetries: number;
  readonly budgetRequeues: number;
  readonly sdkRetries: number;
  readonly stateCalls: number;
  readonly kubeCalls: number;
  readonly budgetWrites: number;
  readonly invocations: number;
  readonly simulatedSeconds: number;
  readonly wallMs: number;
}

const nlbTargetTypeAnnotation = 'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type';

type World = ReturnType<typeof ourWorld>;

function podIp(service: number, pod: number): string {
  return `10.${64 + Math.floor(service / 250)}.${service % 250}.${pod + 10}`;
}

/** The Service's one slice: its ready pods, and the next one, ready from t0 on. */
function sliceOf(service: number, newPodReady: boolean): EndpointSliceView {
  const endpoint = (pod: number, ready: boolean) => ({
    addresses: [podIp(service, pod)],
    conditions: { ready, serving: ready, terminating: false },
    targetRef: { kind: 'Pod' },
  });
  const before = podTargetsModel.readyPodsBefore;
  return {
    addressType: 'IPv4',
    ports: podTargetsModel.ports.map((p) => ({
      name: p.name,
      port: p.targetPort,
      protocol: 'TCP',
    })),
    endpoints: [
      ...Array.from({ length: before }, (_, pod) => endpoint(pod, true)),
      endpoint(before, newPodReady),
    ],
  };
}

/**
 * One Service in ip mode as a completed full sync leaves it: the Service, its slice, its pod
 * target groups in the fake AWS and its record. Returns, by target group ARN, the target the new
 * pod must end up as.
 */
function seedPodService(world: World, i: number, { namespace, name }: SimService) {
  const key = `${namespace}/${name}`;
  const uid = `uid-${i}`;
  const service = makeService({
    name,
    namespace,
    uid,
    finalizers: [upstreamFinalizer],
    annotations: { [nlbTargetTypeAnnotation]: 'ip' },
    ports: podTargetsModel.ports.map((p) => ({
      name: p.name,
      protocol: 'TCP',
      port: p.port,
      targetPort: p.targetPort,
      nodePort: 30000 + p.port,
    })),
  });
  world.kube.put(service);
  const slices = [sliceOf(i, false)];
  world.kube.endpointSlices.set(key, slices);
  const lb = `arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/k8s-${i}/${i}`;
  const expected = new Map<string, string>();
  const groups = podTargetsModel.ports.map((p) => {
    const arn = `arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-${i}-${p.port}-ip/${i}`;
    const targets = Array.from(
      { length: podTargetsModel.readyPodsBefore },
      (_, pod) => `${podIp(i, pod)}:${p.targetPort}`,
    ).sort();
    world.account.addTargetGroup({
      arn,
      serviceKey: key,
      serviceUid: uid,
      loadBalancerArn: lb,
      targetType: 'ip',
      port: p.targetPort,
      targets,
    });
    expected.set(arn, `${podIp(i, podTargetsModel.readyPodsBefore)}:${p.targetPort}`);
    const recorded = { arn, name: `k8s-${i}-${p.port}-ip`, targetType: 'ip' as const, targets };
    return [String(p.port), recorded] as const;
  });
  // The checkpoint reads only the claim and the provider's fingerprint of the dependencies.
  const deps = world.runtimes[0]!.syncDeps as SyncDependencies;
  world.table.seed({
    key,
    uid,
    snapshot: service,
    provider: toProviderState({
      loadBalancerArn: lb,
      loadBalancerName: `k8s-${i}`,
      dnsName: `k8s-${i}.elb.us-east-1.amazonaws.com`,
      securityGroupId: `sg-${i}`,
      targetGroups: Object.fromEntries(groups),
    }),
    status: { ingress: [{ hostname: `k8s-${i}.elb.us-east-1.amazonaws.com` }] },
    checkpoint: podTargetsCheckpoint(service, deps),
    hostsHash: '',
    targetsHash: endpointsDigest(slices),
    updatedAt: world.clock.now().toISOString(),
  });
  return expected;
}

/** `services` ip-mode Services; at t0 one more pod of each becomes ready. */
export async function simulatePodTargets(services: number): Promise<PodTargetsRun> {
  const model = worldModel;
  const started = performance.now();
  const world = ourWorld([], {
    elbv2CallsPerSecond: model.elbv2CallsPerSecond,
    seed: services * 7919 + 36,
    fairQueue: true,
    budget: defaultRegistrationBudget,
  });
  await world.ready();
  const { clock, account, queue, kube } = world;
  const keys: string[] = [];
  const expected = new Map<string, Map<string, string>>();
  for (let i = 0; i < services; i++) {
    const service = { namespace: `team-${i % 20}`, name: `svc-${i}` };
    keys.push(`${service.namespace}/${service.name}`);
    expected.set(keys[i]!, seedPodService(world, i, service));
  }
  const completions = new Map<string, number>();
  let allRegistered: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (allRegistered = resolve));
  account.onTargetsChanged = (tg) => {
    const wanted = expected.get(tg.serviceKey);
    if (wanted === undefined || completions.has(tg.serviceKey)) return;
    const has = ([arn, target]: [string, string]) =>
      account.targetGroups.get(arn)?.targets.has(target) === true;
    if (![...wanted].every(has)) return;
    completions.set(tg.serviceKey, clock.ms);
    if (completions.size === services) allRegistered();
  };
  let stopped = false;
  const main = (async () => {
    const { work } = world.startFunctions(() => stopped);
    // t0: each Service's new pod turns ready; the forwarder has the slices' events a watch later.
    keys.forEach((key, i) => kube.endpointSlices.set(key, [sliceOf(i, true)]));
    await clock.sleep(model.watchMs);
    for (let i = 0; i < keys.length; i += 10) {
      const batch = keys.slice(i, i + 10);
      await queue.sendFromForwarder(
        batch.map((key): WorkMessage => ({ v: 1, kind: 'targets', key, reason: 'endpoints' })),
      );
    }
    await done;
    // The passes still running end (a pass records its targets after the last registration), so
    // the calls counted are whole syncs'.
    while (queue.depth > 0) await clock.sleep(model.latencyMs);
    stopped = true;
    return work;
  })();
  const stats = await clock.run(main, 6 * 3600_000);
  const times = [...completions.values()].sort((a, b) => a - b);
  return {
    services,
    p50Ms: median(times),
    p99Ms: percentile(times, 99),
    maxMs: times.at(-1) ?? Number.NaN,
    elbv2Attempts: account.stats.attempts,
    throttledAttempts: account.stats.throttled,
    elbv2ByOperation: { ...account.stats.byOperation },
    throttledByOperation: { ...account.stats.throttledByOperation },
    syncs: world.metrics.counts.get('Syncs') ?? 0,
    syncRetries: world.metrics.counts.get('Retries') ?? 0,
    budgetRequeues: world.metrics.counts.get('Syncs.requeue-after') ?? 0,
    sdkRetries: world.clients.reduce((n, c) => n + c.stats.retries, 0),
    stateCalls: world.table.stats.calls,
    kubeCalls: world.kubeCalls.calls,
    budgetWrites: world.budgetItem.stats.writes,
    invocations: stats.invocations,
    simulatedSeconds: clock.ms / 1000,
    wallMs: performance.now() - started,
  };
}
