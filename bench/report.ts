/**
 * Turns the results of `npm run bench` into bench/results/latest.json, latest.md (tables, model,
 * assumptions) and SVG charts, formatted as the repository's Prettier configuration wants them.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as prettier from 'prettier';
import { anchors, type ScenarioCalls } from './scenarios/calls';
import { floorDefinition, scaledTotal, type CostResult } from './scenarios/cost';
import type { ForwarderResult } from './scenarios/forwarder';
import {
  bundleBaseline,
  bundleGoals,
  bundleToday,
  type BundleResult,
  type BundlesResult,
} from './scenarios/bundles';
import type {
  BudgetFairnessRun,
  BurstRun,
  OursRun,
  PropagationResult,
  SeedRun,
} from './scenarios/propagation';
import { maxRecordedTargets, type ScaleResult } from './scenarios/scale';
import type { ThroughputResult } from './scenarios/throughput';
import { percentile, round } from './support/stats';
import { barChart, lineChart } from './support/svg';

export interface BenchResults {
  readonly generatedAt: string;
  readonly machine: {
    readonly cpus: number;
    readonly cpuModel: string;
    readonly memoryGiB: number;
    readonly loadAverage: readonly number[];
    readonly node: string;
  };
  readonly totalSeconds: number;
  readonly sectionSeconds: Record<string, number>;
  readonly errors: { readonly section: string; readonly message: string }[];
  readonly calls?: ScenarioCalls[] | undefined;
  readonly propagation?: PropagationResult | undefined;
  readonly throughput?: ThroughputResult | undefined;
  readonly throughputInMemory?: ThroughputResult | undefined;
  /** The create phase alone with the shared registration budget off. */
  readonly throughputWithoutBudget?: ThroughputResult | undefined;
  readonly forwarder?: ForwarderResult | undefined;
  readonly bundles?: BundlesResult | undefined;
  readonly cost?: CostResult | undefined;
  readonly scale?: ScaleResult | undefined;
}

type Cell = string | number;

function table(headers: readonly string[], rows: readonly (readonly Cell[])[]): string {
  const line = (cells: readonly Cell[]) =>
    `| ${cells.map((c) => String(c).replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(headers), line(headers.map(() => '---')), ...rows.map(line)].join('\n');
}

const s = (ms: number) => `${round(ms / 1000, ms < 10_000 ? 2 : 1)} s`;
const ratio = (ours: number, theirs: number) =>
  theirs === 0 ? 'n/a' : `${round(ours / theirs, 2)}×`;
const money = (v: number) => (v < 0.01 ? `$${v.toFixed(4)}` : `$${v.toFixed(2)}`);

function callsSection(calls: ScenarioCalls[]): string {
  const rows = calls.map((r) => {
    const a = anchors[r.scenario];
    return [
      a.label,
      r.cloud,
      a.goal,
      r.cloud <= a.goal ? 'yes' : '**no**',
      a.cpa,
      ratio(r.cloud, a.cpa),
      a.albcText,
      ratio(r.cloud, a.albc),
      r.tagging,
      r.state,
      r.kube,
      Object.entries(r.byOperation)
        .map(([op, n]) => `${op.split('.')[1] ?? op}×${n}`)
        .join(' ') || '—',
    ];
  });
  return [
    '## AWS calls per scenario',
    '',
    'One Service with 2 ports and 3 nodes, through the real use cases (syncService, syncNodes, syncHosts) and the real NLB provider against moto; counted with SDK middleware. The anchors are the counts in docs/design.md §5 (cloud-provider-aws legacy NLB, counted from its code; aws-load-balancer-controller, approximate; its ratio uses the middle of its range). "State ops" are state-store port calls and "Kubernetes" the Kubernetes API and Events calls of the use cases (in-memory here, so they are counted, not timed).',
    '',
    table(
      [
        'scenario',
        'ours: ELBv2+EC2',
        'goal',
        'within goal',
        'cloud-provider-aws',
        'ours / CPA',
        'AWS LB Controller',
        'ours / ALBC',
        'tagging API',
        'state ops',
        'Kubernetes',
        'ours, by operation',
      ],
      rows,
    ),
    '',
    '![AWS calls per scenario](calls.svg)',
  ].join('\n');
}

export function propagationSection(p: PropagationResult): string {
  const m = p.model;
  const rows = p.ours.map((ours, i) => {
    const seed = p.seed[i]!;
    const low = p.oursLowBudget[i]!;
    return [
      ours.services,
      s(ours.p50Ms),
      s(ours.maxMs),
      s(seed.p50Ms),
      s(seed.maxMs),
      ratio(ours.p50Ms, seed.p50Ms),
      ratio(ours.maxMs, seed.maxMs),
      `${ours.elbv2Attempts} (${ours.throttledAttempts} throttled)`,
      ours.sdkRetries,
      ours.syncRetries,
      `${s(low.p50Ms)} / ${s(low.maxMs)} (${low.throttledAttempts} throttled)`,
    ];
  });
  const limits = Object.values(p.rateLimits).map((l) => [
    l.applies,
    l.capacity,
    `${l.refillPerSecond}/s`,
    l.source,
  ]);
  return [
    '## Node-change propagation',
    '',
    `Time from a node being added in the API server until every affected NLB has it registered in all its target groups, for ${p.ours.map((o) => o.services).join(', ')} LoadBalancer Services (${m.portsPerService} ports each, ${m.initialNodes} nodes before). Simulated on a virtual clock (no real waiting), the same way for both designs: every remote call (ELBv2, EC2, SQS, DynamoDB, Kubernetes) takes **${m.latencyMs} ms**, and ELBv2/EC2 enforce the account-level token buckets below.`,
    '',
    `- **Ours**: the real runtime and use cases — processWorkBatch → runNodeSync → syncNodes, then processWorkBatch → processKey → syncHosts → NlbProvider.updateLoadBalancer — over in-memory fakes written for the benchmark (bench/sim/): a queue and event source mapping (batches of ${m.batchSize}, ${m.batchingWindowMs} ms batching window, maximum concurrency from functions/contract/queue-limits.ts for \`elbv2CallsPerSecond\` = ${m.elbv2CallsPerSecond}, i.e. ${p.ours[0]?.concurrency ?? '?'} warm function instances), a state table with DynamoStateStore's lease semantics (one ${m.latencyMs} ms request per DynamoDB call it would make; a Scan page per MB), the Kubernetes API, and ELBv2. Each instance has its own SDK clients: the per-process limiter of functions/aws/clients.ts (registrations instead book slots on the shared budget of functions/aws/registration-budget.ts, whose DynamoDB item is modelled with the same conditions and one ${m.latencyMs} ms request per write) and the SDK's \`adaptive\` retry mode (5 attempts, throttling backoff, retry quota and CUBIC rate limiter as in @smithy/core). A sync whose call the SDK gives up on backs off through SQS visibility (5 s, doubling). The forwarder hop is one watch delivery plus one SendMessageBatch.`,
    `- **Seed** (v1.15/1.16 service controller with cloud-provider-aws): the node-sync loop runs every ${m.seed.periodSeconds} s; after a node change it calls UpdateLoadBalancer for every LB Service, one after another, ${m.seed.callsPerLoadBalancer.length} ELBv2/EC2 calls each (docs/design.md §5; the call list is in bench/scenarios/propagation.ts), on the same buckets and latency. Its client waits for a token instead of being throttled (optimistic for the seed). The loop restarts ${m.seed.periodSeconds} s after it ends (wait.Until), so a cycle lasts the loop L plus the period P, and a node change that lands during a loop waits for its end and a period: p50 adds the average wait for the next loop ((L + P) / 2) and the informer delay (${m.seed.informerMs} ms) to the median position in the loop; max adds the worst wait (L + P) to the whole loop.`,
    '',
    table(
      [
        'LB Services',
        'ours p50',
        'ours max',
        'seed p50',
        'seed max',
        'p50 ours/seed',
        'max ours/seed',
        'ours ELBv2 attempts',
        'ours SDK retries',
        'ours syncs backed off',
        'ours with elbv2CallsPerSecond=4 (2 instances): p50 / max',
      ],
      rows,
    ),
    '',
    'ELBv2/EC2 rate limits modelled (per account and Region, token buckets):',
    '',
    table(['APIs', 'bucket', 'refill', 'source'], limits),
    '',
    `With 1 Service, ours is one hop: the node message goes to the node queue, whose event source has no batching window, and node sync runs the host update itself (up to \`directHostUpdates\` = 5 Services; more go through the work queue); the rest is some fifteen ${m.latencyMs} ms calls. The seed is mostly the wait for its next ${m.seed.periodSeconds} s tick.`,
    '',
    (() => {
      const big = p.ours.at(-1)!;
      const low = p.oursLowBudget.at(-1)!;
      const seed = p.seed.at(-1)!;
      const reg = p.rateLimits.elbv2Registration;
      const perLb = (seed.loopMs.at(-1) ?? 0) / 1000 / Math.max(1, seed.services);
      return `At ${big.services} Services ours is bound by the RegisterTargets bucket (${reg.refillPerSecond}/s after a burst of ${reg.capacity}), 2 RegisterTargets calls per LB (after one DescribeTags that checks the target groups are ours); the seed's loop makes ${m.seed.callsPerLoadBalancer.length} calls per LB and took ${perLb.toFixed(2)} s per LB here. With the default settings (\`elbv2CallsPerSecond\` = 20, 5 instances) every instance books its registrations on one shared budget (below): ${big.throttledAttempts} of ${big.elbv2Attempts} ELBv2 attempts were throttled and ${big.syncRetries} syncs backed off, and the last NLB had the node at ${s(big.maxMs)}. With a budget of 4 (2 instances): ${low.throttledAttempts} of ${low.elbv2Attempts} throttled, ${low.syncRetries} backed off, last NLB at ${s(low.maxMs)}.`;
    })(),
    '',
    '![Propagation time](propagation.svg)',
    '',
    '![NLBs updated over time, 1,000 Services](propagation-cdf.svg)',
    ...(p.oursSharedQueue ? ['', nodeQueueSection(p)] : []),
    ...(p.registrationBudget
      ? ['', registrationBudgetSection(p.registrationBudget, p.rateLimits)]
      : []),
    ...(p.namespaceBurst ? ['', namespaceBurstSection(p.namespaceBurst)] : []),
    ...(p.budgetFairness ? ['', budgetFairnessSection(p.budgetFairness)] : []),
  ].join('\n');
}

/** Issue 21 items 1 and 2: node messages on their own queue, and one hop to the NLB. */
export function nodeQueueSection(p: PropagationResult): string {
  const m = p.model;
  // One queue hop and one RegisterTargets: the watch event, the forwarder's send, the invoke, the call.
  const floorMs = m.watchMs + m.latencyMs + m.invokeMs + m.latencyMs;
  const rows = p.ours.map((ours, i) => {
    const today = p.oursSharedQueue?.[i];
    const goal = ours.services === 1 ? 1500 : (today?.p50Ms ?? Number.NaN);
    return [
      ours.services,
      s(ours.p50Ms),
      today ? s(today.p50Ms) : '–',
      ours.services === 1 ? '≤ 1.5 s' : `≤ today (${today ? s(today.p50Ms) : '?'})`,
      ours.p50Ms <= goal ? 'met' : '**not met**',
      today ? ratio(ours.p50Ms, today.p50Ms) : '–',
      ours.services === 1 ? `${ratio(ours.p50Ms, floorMs)} (floor ${s(floorMs)})` : '–',
      `${s(ours.maxMs)} / ${today ? s(today.maxMs) : '–'}`,
    ];
  });
  const burst = p.nodeDuringBurst;
  return [
    '### Node queue and one hop (issue 21, items 1 and 2)',
    '',
    `Node messages (node changes, the timer's ticks) have a queue of their own, consumed by the node-sync function (maximum concurrency 2, no batching window); node sync runs the host updates of a change that touches at most \`directHostUpdates\` (5) Services itself, under each key's lease, and sends larger fan-outs to the work queue. "Today" is release 0.1's layout measured in the same run: node messages on the work queue and every host update through it. The floor for 1 Service is one queue hop plus one RegisterTargets: the watch event (${m.watchMs} ms), the forwarder's send, the invoke (${m.invokeMs} ms) and the call (${m.latencyMs} ms each).`,
    '',
    table(
      [
        'LB Services',
        'p50',
        'p50 today (0.1 layout)',
        'goal',
        '',
        'ratio to today',
        'ratio to floor',
        'max / max today',
      ],
      rows,
    ),
    ...(burst
      ? [
          '',
          `A node joins 5 s into a burst of ${burst.nodeQueue.burstServices} Services' host updates (two RegisterTargets each, on the shared registration budget). Node-sync latency is from the change to the new host set stored; the goal is that it does not depend on the backlog.`,
          '',
          table(
            [
              'layout',
              'node sync ran after',
              'quiet Service NLB has the node after',
              'last NLB after',
            ],
            [burst.nodeQueue, burst.sharedQueue].map((r) => [
              r.nodeQueue ? 'node queue (now)' : 'shared work queue (0.1)',
              s(r.nodeSyncMs),
              s(r.quietMs),
              s(r.lastMs),
            ]),
          ),
          '',
          `Node sync ran ${s(burst.nodeQueue.nodeSyncMs)} after the change with the node queue, against ${s(burst.sharedQueue.nodeSyncMs)} behind the backlog on the shared queue. The NLBs themselves still wait for the registration budget, which the burst holds: the node reaches them with the burst's own host updates.`,
        ]
      : []),
  ].join('\n');
}

/** Issue 21 item 3: one registration budget for all instances, against per-process limiters. */
export function registrationBudgetSection(
  b: NonNullable<PropagationResult['registrationBudget']>,
  limits: PropagationResult['rateLimits'],
): string {
  const { withBudget: ours, perProcess: today, swap } = b;
  const reg = limits.elbv2Registration;
  // 2 RegisterTargets per Service (2 target groups) at the bucket's refill rate.
  const floorMs = ((2 * ours.services) / reg.refillPerSecond) * 1000;
  const pct = (r: { throttledAttempts: number; elbv2Attempts: number }) =>
    (100 * r.throttledAttempts) / Math.max(1, r.elbv2Attempts);
  const met = (ok: boolean) => (ok ? 'met' : '**not met**');
  const spec = ours.budget;
  const swapFloorMs = ((4 * swap.withBudget.services) / reg.refillPerSecond) * 1000;
  return [
    `### Shared registration budget (${ours.services} Services)`,
    '',
    `Every RegisterTargets/DeregisterTargets attempt books a slot on one item of the state table (functions/aws/registration-budget.ts: ${spec ? `${spec.perSecond}/s, burst ${spec.burst}` : 'off'}; registrations book at most 10 s ahead, deregistrations 20 s; past that the sync ends requeue-after). "Today" is the same run with the per-process limiters only (4/s per instance, ${today.concurrency} instances), as before this change. Floor: 2 RegisterTargets per Service at ${reg.refillPerSecond}/s = ${s(floorMs)}.`,
    '',
    table(
      ['figure', 'goal', 'measured', 'ratio to floor', 'today', 'ratio to today', 'goal met'],
      [
        [
          'last NLB has the node',
          `≤ 1.05 × floor (${s(1.05 * floorMs)})`,
          s(ours.maxMs),
          ratio(ours.maxMs, floorMs),
          s(today.maxMs),
          ratio(ours.maxMs, today.maxMs),
          met(ours.maxMs <= 1.05 * floorMs),
        ],
        [
          'throttled ELBv2 attempts',
          '≤ 5 %',
          `${round(pct(ours), 1)} % (${ours.throttledAttempts} of ${ours.elbv2Attempts})`,
          '—',
          `${round(pct(today), 1)} % (${today.throttledAttempts} of ${today.elbv2Attempts})`,
          ratio(pct(ours), pct(today)),
          met(pct(ours) <= 5),
        ],
        [
          'syncs requeued by the budget (not failures)',
          '—',
          ours.budgetRequeues,
          '—',
          '—',
          '—',
          '—',
        ],
        ['syncs backed off (failures)', '—', ours.syncRetries, '—', today.syncRetries, '—', '—'],
        [
          'budget item writes (1 WRU each; refused conditions included)',
          '—',
          `${ours.budgetWrites} (${ours.budgetRefused} refused)`,
          '—',
          0,
          '—',
          '—',
        ],
      ],
    ),
    '',
    `One node removed and one added at once on ${swap.withBudget.services} Services (each host update deregisters one instance and registers one in each of 2 target groups: 4 calls, floor ${s(swapFloorMs)}). Goal: removals done first.`,
    '',
    table(
      [
        'limiter',
        'last removal done',
        'last addition done',
        'removal p50',
        'addition p50',
        'throttled',
        'last removal ahead of last addition by',
      ],
      [swap.withBudget, swap.perProcess].map((r) => [
        r.budget ? 'shared budget' : 'per-process (today)',
        s(r.lastRemovalMs),
        s(r.lastAdditionMs),
        s(r.removalP50Ms),
        s(r.additionP50Ms),
        `${round(pct(r), 1)} %`,
        s(r.lastAdditionMs - r.lastRemovalMs),
      ]),
    ),
  ].join('\n');
}

/** Issue 19, finding 7: one quiet Service behind another namespace's burst, fair queues or not. */
export function namespaceBurstSection(b: NonNullable<PropagationResult['namespaceBurst']>): string {
  const row = (r: BurstRun) => [
    r.fairQueue ? 'fair queue (MessageGroupId per namespace)' : 'plain standard queue',
    s(r.quietMs),
    `${s(r.burstP50Ms)} / ${s(r.burstMaxMs)}`,
    `${r.burstConverged} of ${r.burstServices}`,
    r.noisyGroupsPeak,
    `${r.elbv2Attempts} (${r.throttledAttempts} throttled)`,
  ];
  return [
    '### One Service in a quiet namespace behind a burst in another',
    '',
    `${b.fair.burstServices} Services in namespace \`burst\` need work at once (a tenant applying hundreds of Services, or an annotation-toggle loop); the forwarder sends them in batches of 10, and 5 s later one Service in namespace \`quiet\` changes. Same runtime, fakes and rate limits as above; each message costs a host update (DescribeTags, then 2 RegisterTargets: the only sync the fake ELBv2 serves; a create costs more, so a real burst delays a plain queue longer). The fair queue follows SQS's documented rule (bench/sim/fake-runtime.ts, \`fairQueueModel\`): a group holding over 10 % of the in-flight messages and at least 30 of its own, or over 10 % of recent consumer time, is noisy, and consumers get the other groups' messages first.`,
    '',
    table(
      [
        'queue',
        'quiet Service updated after its change',
        'burst p50 / last',
        'burst converged',
        'noisy groups (peak)',
        'ELBv2 attempts',
      ],
      [row(b.fair), row(b.unfair)],
    ),
    '',
    `With fair queues the quiet Service waits for a consumer to take its message and for its turn at the account's RegisterTargets bucket, which the burst keeps empty (${s(b.fair.quietMs)}), not for the burst ahead of it (${s(b.unfair.quietMs)}); the burst itself finishes at the same pace.`,
  ].join('\n');
}

/** Issue 32, finding 9: one namespace hogging the registration budget, before and after. */
export function budgetFairnessSection(b: NonNullable<PropagationResult['budgetFairness']>): string {
  const row = (r: BudgetFairnessRun) => [
    r.perNamespace ? 'fair between namespaces (now)' : 'first come, first served (before)',
    s(r.quietMs),
    s(r.quietBudgetWaitMs),
    `${r.attackerCalls} of ${r.budgetCallsAllowed}`,
    `${r.elbv2Attempts} (${r.throttledAttempts} throttled)`,
    r.budgetRequeues,
    `${r.budgetWrites} (${r.budgetRefused} refused)`,
  ];
  const f = b.fair;
  return [
    '### Registration budget fairness: one namespace toggling target-node-labels (issue 32, finding 9)',
    '',
    `${f.attackerServices} Services in namespace \`tenant-a\` flip \`aws-load-balancer-target-node-labels\` between two node groups every ${s(f.togglePeriodMs)} for ${s(f.toggleForMs)} (each flip deregisters one group and registers the other in both target groups: 4 calls on the shared registration budget per Service, far more than its 4/s); 20 s in, a node joins and the Service \`quiet/web\` registers it (2 RegisterTargets). Same runtime, fakes, fair queues and rate limits as above, the default budget (4/s, burst 10). Each flip is sent as the host update it causes (the fake ELBv2 serves only host-update calls; a real flip is a full sync, with more reads and the same registrations). "First come, first served" is the budget before this change: the attacker's syncs book the whole horizon (10 s for registrations, 20 s for deregistrations) and the quiet Service books behind all of it. "Fair": a namespace whose latest slot is more than 1 s ahead books its next one only when that slot comes within 1 s (functions/core/registration-slots.ts).`,
    '',
    table(
      [
        'budget',
        'quiet Service has the node after the change',
        'of which waiting on the budget',
        'attacker registrations served while it toggled (of the budget)',
        'ELBv2 attempts',
        'syncs requeued by the budget',
        'budget item writes (1 WRU each)',
      ],
      [row(b.fcfs), row(b.fair)],
    ),
    '',
    `The quiet Service's registrations waited ${s(f.quietBudgetWaitMs)} on the budget instead of ${s(b.fcfs.quietBudgetWaitMs)}, and it had the node ${s(f.quietMs)} after the change instead of ${s(b.fcfs.quietMs)}; the attacker's own registrations go through at the same rate. The price is DynamoDB writes: a namespace over its share tries again when its turn comes, and the budget item refuses the tries that another instance's caller of the same namespace beat (each 1 WRU).`,
  ].join('\n');
}

function throughputRows(t: ThroughputResult): Cell[][] {
  return t.phases.map((ph) => [
    ph.phase === 'node added' ? `node added (${ph.syncs} host updates)` : ph.phase,
    ph.events,
    ph.wallSeconds,
    ph.eventsPerSecond,
    s(ph.e2eP50Ms),
    s(ph.e2eP99Ms),
    s(ph.syncP50Ms),
    s(ph.syncP99Ms),
    ph.invocations,
    `${ph.motoCallMs} ms`,
  ]);
}

const throughputHeaders = [
  'phase',
  'events',
  'wall (s)',
  'events/s',
  'end-to-end p50',
  'end-to-end p99',
  'sync p50',
  'sync p99',
  'invocations',
  'mean moto call',
];

function throughputSection(t: ThroughputResult, inMemory: ThroughputResult | undefined): string {
  return [
    '## Pipeline throughput and sync latency',
    '',
    `Backend: **${t.backend}**. The real forwarder (in process), the real runtime (processWorkBatch) in ${t.concurrency} function instances (the event source mapping's maximum concurrency for the default budget), each with its own SDK clients and per-process limiter; the event source mapping is emulated by pollers that long-poll the queue (batches of 10) and delete what succeeded. Before the first phase, node sync has stored the eligible host set (the forwarder's first Node messages, as within a minute of a deploy), so no phase pays for that one-off. Each phase writes ${t.services} events to the API server at once and waits until all are done: *create* until the Service status carries the NLB's DNS name, *update* (an annotation change) until the Service is synced again, *node added* until every Service's target groups have the new instance, *delete* until the Service is gone (NLB, target groups and security group deleted, finalizer released). End-to-end latency runs from the API write; sync latency is one sync pass (the runtime's SyncLatency metric). Events/s for *node added* counts host updates.`,
    '',
    table(throughputHeaders, throughputRows(t)),
    '',
    `A Service's record item is ${round(t.serviceItemBytes / 1024, 1)} KB after its create (the Service snapshot and provider state), so each record write costs ${Math.ceil(t.serviceItemBytes / 1024)} write units; its lease has an item of its own of ${round((t.leaseItemBytes ?? Number.NaN) / 1024, 2)} KB, so taking, extending and releasing the lease cost ${Math.ceil((t.leaseItemBytes ?? Number.NaN) / 1024)} unit each. In the delete phase the forwarder also forwards the final DELETED watch event; that second sync finds nothing left to do, which is why the delete sync p50 is short.`,
    '',
    'moto dominates: it is one Python process serving every AWS call on the same 2 cores as the forwarder, the fake API server and the runtime, and its mean call time (last column) is several times what ELBv2, SQS or DynamoDB answer in. Creates are further bound by the per-process ELBv2 limiter (5 Create* calls per Service at 5/s per instance, so a batch of 10 creates takes at least 10 s).',
    ...(inMemory === undefined
      ? []
      : [
          '',
          `The same run with the provider port served in memory (**${inMemory.backend}**), which takes ELBv2 and EC2 (and their limiter) out and leaves the pipeline itself — forwarder, SQS, lease and state in DynamoDB, Kubernetes status and finalizer — still on moto:`,
          '',
          table(throughputHeaders, throughputRows(inMemory)),
        ]),
    '',
    'The in-memory model of the whole runtime with 50 ms per call, ELBv2 included, is the propagation section above.',
    '',
    '![Throughput latency](throughput.svg)',
  ].join('\n');
}

function forwarderSection(f: ForwarderResult): string {
  return [
    '## Forwarder memory and CPU',
    '',
    `${f.services.toLocaleString('en-US')} Services (${f.loadBalancerServices.toLocaleString('en-US')} of type LoadBalancer) and ${f.nodes.toLocaleString('en-US')} Nodes, realistic objects, streamed from the fake API server (the benchmark of \`npm run bench:forwarder\`, ${f.services === 10_000 && f.nodes === 5_000 ? 'at its full size' : 'at a reduced size set by BENCH_SERVICES / BENCH_NODES'}). The forwarder is the production bundle with the container's Node flags, sending to moto's SQS; it is measured once every LoadBalancer Service has been forwarded. The baseline keeps full objects in client-node informer caches. Peak RSS is VmHWM, CPU is user+system time, from /proc.`,
    '',
    table(
      ['process', 'peak RSS (MiB)', 'CPU (s)', 'wall (s)'],
      [f.forwarder, f.baseline].map((p) => [p.name, p.peakRssMiB, p.cpuSeconds, p.seconds]),
    ),
    '',
    `Target (docs/design.md §5): ≤ ${f.targetMiB} MiB — ${f.within ? 'met' : '**not met**'}.`,
    '',
    '![Forwarder RSS](forwarder.svg)',
  ].join('\n');
}

export function bundlesSection(b: BundlesResult): string {
  const kib = (n: number | undefined) =>
    n === undefined ? '—' : round(n / 1024, 0).toLocaleString('en-US');
  const ms = (n: number | undefined) => (n === undefined ? '—' : round(n, 0));
  const row = (label: string, f: BundleResult) => [
    label,
    kib(f.bytes),
    kib(f.loadedBytes),
    `${kib(f.totalBytes)} (${f.chunks} chunks)`,
    kib(f.gzipBytes),
    kib(f.sourceMapBytes),
    ms(f.importMs),
    ms(f.sinceStartMs),
    ms(f.firstInvokeMs),
    ms(f.firstStackMs),
    f.stackFrame === undefined ? '—' : `\`${f.stackFrame}\``,
  ];
  return [
    '## Lambda bundles and cold initialisation',
    '',
    `Built with esbuild ${b.esbuild} from the options the stack gives CDK's NodejsFunction (\`${b.options}\`). Cold init: a fresh \`node\` ${b.node} process imports the bundle (with the configuration the stack gives, EKS mode with endpoint and CA, so nothing is looked up); *import* is from the import to the handler export being available, *since process start* adds Node's own start-up. For service-sync, *first invocation* is the handler's first call with an empty batch, which builds the runtime (configuration, SDK clients) as the first real event would, and *first stack* is reading the stack of the first error thrown inside the bundle, with the frame it shows. Medians of ${b.functions[0]?.runs ?? 0} runs, after one unmeasured run. The AWS SDK is inside the bundle: what runs on Lambda is the version the tests ran. Each function is split: *index.mjs* is the handler's file, *loaded at import* adds the chunks it imports statically (what every cold start parses, whatever the message), *all files* adds the chunks read only on demand (the EKS and Secrets Manager clients, credential providers Lambda does not use).`,
    '',
    table(
      [
        'function',
        'index.mjs (KiB)',
        'loaded at import (KiB)',
        'all files (KiB)',
        'gzip, all (KiB)',
        'source map (KiB)',
        'import (ms)',
        'since process start (ms)',
        'first invocation (ms)',
        'first stack (ms)',
        'first frame',
      ],
      [
        ...b.functions.map((f) => row(f.name, f)),
        row('service-sync with source map, `--enable-source-maps` (not shipped)', b.withSourceMaps),
      ],
    ),
    '',
    'The last row is the choice we did not make: with the map, traces name TypeScript files and lines, but the first trace parses the map (the *first stack* column) and the package carries it. Without it, traces name functions and classes (esbuild keeps names). Lambda gives a function CPU in proportion to its memory (512 MB here is a fraction of a vCPU), so the same import can take longer there than on this machine.',
    ...bundleGoalsSection(b),
  ].join('\n');
}

/**
 * Issue 21, item 4: each bundle against the goals, with the SDK bundled (deployed) and without, as a
 * ratio to the figures before this work ("today") and to the floor.
 */
function bundleGoalsSection(b: BundlesResult): string[] {
  const kib = (bytes: number) => round(bytes / 1024, 0);
  const verdict = (ok: boolean) => (ok ? 'met' : '**not met**');
  const ratio = (value: number, to: number) => (to > 0 ? `${round(value / to, 2)}×` : '—');
  const floorMs = b.floor?.importMs;
  const pair = b.todayPair;
  const row = (sdk: 'bundled' | 'external', f: BundleResult) => {
    const today = f.name === 'empty handler' ? undefined : bundleToday[f.name][sdk];
    return [
      f.name,
      sdk === 'bundled' ? 'bundled (deployed)' : 'external',
      kib(f.loadedBytes).toLocaleString('en-US'),
      verdict(kib(f.loadedBytes) <= bundleGoals.maxKiB),
      today === undefined ? '—' : ratio(kib(f.loadedBytes), today.kib),
      ratio(f.loadedBytes, f.ownCodeBytes),
      round(f.importMs, 0),
      verdict(f.importMs <= bundleGoals.maxImportMs),
      today === undefined ? '—' : ratio(f.importMs, today.importMs),
      pair === undefined || sdk === 'external' || f.name !== 'service-sync'
        ? '—'
        : ratio(pair.currentMs, pair.todayMs),
      floorMs === undefined ? '—' : ratio(f.importMs, floorMs),
    ];
  };
  return [
    '',
    `Goals of issue 21 (cold start): ≤ ${bundleGoals.maxKiB} KiB and import ≤ ${bundleGoals.maxImportMs} ms per bundle. The size is what an import loads (index.mjs and the chunks it imports statically: the same for every message kind; the chunks read on demand are not counted). *Of today* is the ratio to the figures before splitting and the schema rewrite (bench/results/latest.md at commit 8cfd77f, one file per function: service-sync 1,473 KiB and 351 ms with the SDK bundled); *of floor* is the ratio to the floor: for size, our own code among the loaded bytes (what would be left if every dependency cost nothing); for import, an ES module with an empty handler imported the same way in this run${floorMs === undefined ? '' : ` (${round(floorMs, 0)} ms)`}. Import times depend on the machine's load, so *of today, this run* compares service-sync with the same function built as it was then (one file, SDK schemas as published), the two imported turn about in this run${pair === undefined ? '' : ` (${round(pair.currentMs, 0)} ms against ${round(pair.todayMs, 0)} ms for ${kib(pair.todayBytes).toLocaleString('en-US')} KiB)`}. *SDK external* leaves \`@aws-sdk/*\` to the runtime (not deployed so): its import then loads the SDK from node_modules. Before issue 21: ${bundleBaseline.label}, ${bundleBaseline.kib.toLocaleString('en-US')} KiB and ${bundleBaseline.importMs} ms.`,
    '',
    table(
      [
        'function',
        'AWS SDK',
        'loaded at import (KiB)',
        'size goal',
        'of today',
        'of floor',
        'import (ms)',
        'import goal',
        'of today',
        'of today, this run',
        'of floor',
      ],
      [
        ...b.functions.map((f) => row('bundled', f)),
        ...(b.withoutSdk ?? []).map((f) => row('external', f)),
      ],
    ),
  ];
}

function costSection(c: CostResult, t: ThroughputResult | undefined): string {
  const rows = c.rows.map((r) => [
    r.per,
    round(r.perEvent.sqsRequests, 2),
    round(r.perEvent.invocations, 3),
    round(r.perEvent.gbSeconds, 3),
    round(r.perEvent.wru, 1),
    round(r.perEvent.rru, 1),
    money(r.perMillion.sqs),
    money(r.perMillion.lambdaRequests),
    money(r.perMillion.lambdaCompute),
    money(r.perMillion.dynamoWrites),
    money(r.perMillion.dynamoReads),
    `**${money(r.perMillion.total)}**`,
  ]);
  const scaled = t?.phases.map((ph, i) => {
    const row = c.rows[i]!;
    const total = scaledTotal(row, ph.motoCallMs);
    return [
      row.per,
      `${ph.motoCallMs} ms`,
      money(row.perMillion.lambdaCompute - (row.perMillion.total - total)),
      money(total),
    ];
  });
  return [
    '## Cost per million events',
    '',
    `From the counts of the throughput run (per event = phase total ÷ events). Prices: ${c.prices.asOf}.`,
    '',
    table(
      ['item', 'price'],
      [
        [
          'SQS standard, per request (a batch of ≤ 10 messages is one request)',
          '$0.40 per million',
        ],
        ['Lambda requests', '$0.20 per million'],
        [`Lambda duration, arm64 (${c.memoryMiB} MB functions)`, '$0.0000133334 per GB-second'],
        ['DynamoDB on-demand writes', '$0.625 per million write request units'],
        ['DynamoDB on-demand reads', '$0.125 per million read request units'],
      ],
    ),
    '',
    `Formula: ${c.formula}. DynamoDB units are estimated from item sizes by AWS's rounding (1 KB per write unit of the larger of the item before and after, 4 KB per strongly consistent read unit, transactions twice, batch writes per item, a failed conditional write still pays for the item).`,
    '',
    table(
      [
        'per',
        'SQS req',
        'invocations',
        'GB-s',
        'WRU',
        'RRU',
        'SQS',
        'Lambda req',
        'Lambda compute',
        'DynamoDB writes',
        'DynamoDB reads',
        'total per million',
      ],
      rows,
    ),
    '',
    "Lambda compute above is billed on the durations measured against moto, whose calls are slower than AWS's. Scaled to 50 ms per AWS call (duration × 50 ms ÷ mean moto call; a rough lower bound for phases bound by the per-process limiter, whose waits do not shrink):",
    '',
    scaled === undefined
      ? ''
      : table(['per', 'mean moto call', 'Lambda compute, scaled', 'total, scaled'], scaled),
    '',
    ...costGoalsSection(c),
    `Not included: ${c.excluded.join('; ')}.`,
    '',
    '![Cost per million events](cost.svg)',
  ].join('\n');
}

/** Issue 21's goal: each figure at most half of what release 0.1's state layout cost. */
function costGoalsSection(c: CostResult): string[] {
  if (c.goals.length === 0) return [];
  return [
    `Goal (issue 21): each figure at most half of today's, today being release 0.1's state layout (its figures and this run's, both billed on moto's durations: the issue's measure). The ${floorDefinition}. Lambda compute billed on moto's durations moves with this machine's load (moto's mean call here against ~400 ms in today's run), so the same comparison follows with Lambda compute scaled to 50 ms per AWS call on both sides, and with the write units per event, which do not depend on the machine at all.`,
    '',
    table(
      [
        'per Service event',
        'today',
        'goal',
        'now',
        'met',
        'now ÷ today',
        'now ÷ floor',
        'floor',
        'today, scaled',
        'now, scaled',
        'scaled: now ÷ today',
        'write units: today → now',
      ],
      c.goals.map((g) => [
        g.phase,
        money(g.today),
        `≤ ${money(g.goal)}`,
        `**${money(g.now)}**`,
        g.now <= g.goal ? 'yes' : 'no',
        round(g.now / g.today, 2),
        round(g.now / g.floor, 1),
        money(g.floor),
        money(g.todayScaled),
        `**${money(g.nowScaled)}**`,
        `${round(g.nowScaled / g.todayScaled, 2)}${g.nowScaled <= g.todayScaled / 2 ? ' (half met)' : ''}`,
        `${g.todayWru} → ${round(g.nowWru, 1)} (${round(g.nowWru / g.todayWru, 2)})`,
      ]),
    ),
    '',
    ...c.goals
      .filter((g) => g.todayCompute >= g.goal && g.now > g.goal)
      .flatMap((g) => [
        `Why ${g.phase} misses its goal on the issue's measure: release 0.1 spent ${money(g.todayCompute)} per million on Lambda compute alone, above the goal of ${money(g.goal)}, so halving the total needs less compute than 0.1 billed. Billed on moto's durations, compute is the functions' wall time, which moto, one process serving every call on this machine, sets; and the ${g.phase} phase now also waits for the shared registration budget (4/s for every instance together), where 0.1's registrations waited only on each instance's own limiter (4/s each, 20/s across 5 instances), which moto never throttled and AWS would have. What the state layout controls, the write units, went from ${g.todayWru} (0.1, counted the same way) to ${round(g.nowWru, 1)}.`,
        ...(g.phase === 'create' && c.createWithoutBudget !== undefined
          ? [
              '',
              `The same create burst with the shared registration budget off (this tree, registrations on each instance's own limiter as in 0.1; moto's mean call ${round(c.createWithoutBudget.motoCallMs, 0)} ms): ${money(c.createWithoutBudget.total)} billed (${round(c.createWithoutBudget.total / g.today, 2)} of today), ${money(c.createWithoutBudget.scaled)} scaled (${round(c.createWithoutBudget.scaled / g.todayScaled, 2)} of today, scaled), ${round(c.createWithoutBudget.wru, 1)} write units. The difference from the row above is what the budget's waits cost in Lambda time on this machine; against AWS, which throttles registrations beyond 4/s where moto does not, 0.1 would have waited on SDK retries instead.`,
            ]
          : []),
        '',
      ]),
  ];
}

function assumptions(results: BenchResults): string {
  const p = results.propagation;
  return [
    '## Assumptions and limits',
    '',
    `- Machine: ${results.machine.cpus} × ${results.machine.cpuModel}, ${results.machine.memoryGiB} GiB, Node ${results.machine.node}; load average at the start ${results.machine.loadAverage.map((l) => round(l, 2)).join(' / ')}. Wall-clock numbers (throughput, forwarder, cold init) move with the machine's load; call counts and the simulated propagation do not.`,
    `- Propagation: a fixed ${p?.model.latencyMs ?? 50} ms for every remote call, no jitter; warm Lambda instances (no cold start); ELBv2 registration bucket ${p?.rateLimits.elbv2Registration.capacity ?? 20} tokens at ${p?.rateLimits.elbv2Registration.refillPerSecond ?? 4}/s shared by RegisterTargets and DeregisterTargets and by nobody else in the account; throttled requests consume no token; the seed's client never sees a throttle (it waits for a token), and its informer already has the node; the seed's 16 calls are those docs/design.md §5 counts for one added node with a warm instance cache; jitter of the SDK backoff comes from a seeded PRNG, so runs repeat exactly.`,
    "- Throughput: each phase is one burst of events written at once; moto and the fake API server stand in for AWS and Kubernetes (a second run serves the provider port from memory, so only SQS and DynamoDB stay on moto); the event source mapping is emulated (long polling with 1 s waits, no batching window, no scaling ramp); all function instances share this machine's 2 cores with moto.",
    '- Cost: measured counts of one burst per phase; DynamoDB units estimated from item sizes; Lambda duration as measured on moto (plus a scaled variant); see the list of exclusions.',
    '- Bundles: built locally as CDK would, not taken from a synthesised cloud assembly; cold init measured on this machine, not in Lambda.',
  ].join('\n');
}

function cdf(values: readonly number[]): number[] {
  return Array.from({ length: 21 }, (_, i) => round(percentile(values, i * 5), 0));
}

/** What goes into latest.json: the full results, with per-Service timings reduced to percentiles. */
function forJson(results: BenchResults): unknown {
  const p = results.propagation;
  const run = ({ completionsMs, ...rest }: OursRun) => ({
    ...rest,
    completionPercentilesMs: cdf(completionsMs),
  });
  const seed = ({ loopMs, ...rest }: SeedRun) => ({
    ...rest,
    loopPercentilesMs: cdf(loopMs),
  });
  return {
    ...results,
    propagation:
      p === undefined
        ? undefined
        : {
            ...p,
            ours: p.ours.map(run),
            oursSharedQueue: p.oursSharedQueue?.map(run),
            oursLowBudget: p.oursLowBudget.map(run),
            seed: p.seed.map(seed),
          },
  };
}

function charts(results: BenchResults): Record<string, string> {
  const out: Record<string, string> = {};
  if (results.calls) {
    out['calls.svg'] = barChart({
      title: 'ELBv2 + EC2 calls per Service (2 ports, 3 nodes)',
      categories: results.calls.map((r) => anchors[r.scenario].label),
      series: [
        { name: 'ours (measured, moto)', values: results.calls.map((r) => r.cloud) },
        {
          name: 'cloud-provider-aws (design.md §5)',
          values: results.calls.map((r) => anchors[r.scenario].cpa),
        },
        {
          name: 'AWS LB Controller (design.md §5, approx.)',
          values: results.calls.map((r) => anchors[r.scenario].albc),
        },
      ],
      yLabel: 'calls',
    });
  }
  const p = results.propagation;
  if (p) {
    out['propagation.svg'] = barChart({
      title: 'Node added → every affected NLB updated (simulated, 50 ms per call)',
      categories: p.ours.map((o) => `${o.services} LB Service${o.services === 1 ? '' : 's'}`),
      series: [
        { name: 'ours p50', values: p.ours.map((o) => o.p50Ms / 1000) },
        { name: 'ours max', values: p.ours.map((o) => o.maxMs / 1000) },
        { name: 'seed p50', values: p.seed.map((o) => o.p50Ms / 1000) },
        { name: 'seed max', values: p.seed.map((o) => o.maxMs / 1000) },
      ],
      yLabel: 'seconds (log scale)',
      log: true,
    });
    const largest = p.ours.at(-1);
    const largestSeed = p.seed.at(-1);
    if (largest && largestSeed) {
      const n = largest.completionsMs.length;
      const seedOffset = p.model.seed.informerMs + (p.model.seed.periodSeconds * 1000) / 2;
      out['propagation-cdf.svg'] = lineChart({
        title: `Share of ${n.toLocaleString('en-US')} NLBs updated after a node is added`,
        series: [
          {
            name: 'ours',
            points: [
              [0, 0],
              ...largest.completionsMs.map((t, i) => [t / 1000, (i + 1) / n] as const),
            ],
          },
          {
            name: 'seed (average tick wait)',
            points: [
              [0, 0],
              [seedOffset / 1000, 0],
              ...largestSeed.loopMs.map((t, i) => [(t + seedOffset) / 1000, (i + 1) / n] as const),
            ],
          },
        ],
        xLabel: 'seconds after the node was added',
        yLabel: 'share of NLBs updated',
      });
    }
  }
  const t = results.throughput;
  if (t) {
    out['throughput.svg'] = barChart({
      title: `End-to-end and sync latency per phase (${t.services} Services, moto)`,
      categories: t.phases.map((ph) => ph.phase),
      series: [
        { name: 'end-to-end p50', values: t.phases.map((ph) => ph.e2eP50Ms / 1000) },
        { name: 'end-to-end p99', values: t.phases.map((ph) => ph.e2eP99Ms / 1000) },
        { name: 'sync p50', values: t.phases.map((ph) => ph.syncP50Ms / 1000) },
        { name: 'sync p99', values: t.phases.map((ph) => ph.syncP99Ms / 1000) },
      ],
      yLabel: 'seconds',
    });
  }
  const f = results.forwarder;
  if (f) {
    out['forwarder.svg'] = barChart({
      title: `Peak RSS, ${f.services.toLocaleString('en-US')} Services + ${f.nodes.toLocaleString('en-US')} Nodes`,
      categories: ['peak RSS (MiB)'],
      series: [
        { name: 'forwarder', values: [f.forwarder.peakRssMiB] },
        { name: 'client-node informers', values: [f.baseline.peakRssMiB] },
      ],
      yLabel: 'MiB',
      reference: { value: f.targetMiB, label: `target ${f.targetMiB} MiB` },
    });
  }
  const c = results.cost;
  if (c) {
    out['cost.svg'] = barChart({
      title: 'Cost per million events (us-east-1, measured counts on moto)',
      categories: c.rows.map((r) =>
        r.phase === 'node added' ? 'host update (node added)' : r.phase,
      ),
      series: [
        { name: 'SQS', values: c.rows.map((r) => r.perMillion.sqs) },
        { name: 'Lambda requests', values: c.rows.map((r) => r.perMillion.lambdaRequests) },
        { name: 'Lambda compute', values: c.rows.map((r) => r.perMillion.lambdaCompute) },
        { name: 'DynamoDB writes', values: c.rows.map((r) => r.perMillion.dynamoWrites) },
        { name: 'DynamoDB reads', values: c.rows.map((r) => r.perMillion.dynamoReads) },
      ],
      yLabel: 'US$ per million events',
      stacked: true,
    });
  }
  return out;
}

export function renderMarkdown(results: BenchResults): string {
  const designBudgets = '[docs/design.md §5](../../docs/design.md#5-performance-budgets)';
  const sections = [
    '# Benchmarks',
    '',
    `Generated by \`npm run bench\` on ${results.generatedAt} in ${round(results.totalSeconds, 0)} s (${Object.entries(
      results.sectionSeconds,
    )
      .map(([name, seconds]) => `${name} ${round(seconds, 0)} s`)
      .join(', ')}). Data: [latest.json](latest.json). Design budgets: ${designBudgets}.`,
  ];
  if (results.errors.length > 0) {
    sections.push(
      '',
      '**Sections that failed:**',
      '',
      ...results.errors.map((e) => `- ${e.section}: ${e.message.split('\n')[0] ?? ''}`),
    );
  }
  if (results.calls) sections.push('', callsSection(results.calls));
  if (results.propagation) sections.push('', propagationSection(results.propagation));
  if (results.throughput) {
    sections.push('', throughputSection(results.throughput, results.throughputInMemory));
  }
  if (results.forwarder) sections.push('', forwarderSection(results.forwarder));
  if (results.bundles) sections.push('', bundlesSection(results.bundles));
  if (results.cost) sections.push('', costSection(results.cost, results.throughput));
  if (results.scale) sections.push('', scaleSection(results.scale));
  sections.push('', assumptions(results), '');
  return sections.join('\n');
}

const kb = (bytes: number) => `${round(bytes / 1024, 1)} KB`;

/** Issue 21 item 5: 10,000 Services on 5,000 nodes. */
export function scaleSection(r: ScaleResult): string {
  const m = r.model;
  const p = r.propagation;
  const limit = r.record.itemLimitBytes;
  return [
    `## ${m.services.toLocaleString('en')} LoadBalancer Services on ${m.nodes.toLocaleString('en')} nodes`,
    '',
    `What grows with the cluster (bench/scenarios/scale.ts). Node-change completion is the propagation simulation above at ${m.services.toLocaleString('en')} Services (on 3 nodes: the node count changes what a call carries, not how many there are). Item sizes come from the functions' own serialisation with DynamoDB's item-size rule; the sweep's scan is DynamoStateStore.listServiceItems paging a table of ${m.services.toLocaleString('en')} records, their lease items and the host set, served in 1 MB pages and billed as strongly consistent reads (1 unit per 4 KB read, whatever the filter keeps), ${m.latencyMs} ms per page.`,
    '',
    table(
      ['figure', 'measured', 'goal or limit', 'ratio'],
      [
        [
          'node change: last NLB has the node',
          s(p.maxMs),
          `floor ${s(r.floorMs)} (${m.services * m.portsPerService} RegisterTargets at 4/s)`,
          `${ratio(p.maxMs, r.floorMs)} of the floor`,
        ],
        [
          'throttled ELBv2 attempts',
          `${p.throttledAttempts} of ${p.elbv2Attempts}`,
          '≤ 5 %',
          `${round((100 * p.throttledAttempts) / Math.max(1, p.elbv2Attempts), 1)} %`,
        ],
        [
          `a Service's record item, ${m.portsPerService} ports`,
          kb(r.record.bytesUnrecordedTargets),
          `400 KB item limit; ${Math.ceil(r.record.bytesUnrecordedTargets / 1024)} write units a write`,
          `${round(r.record.bytesUnrecordedTargets / limit, 3)} of the limit`,
        ],
        [
          '… the same with every target recorded (before)',
          kb(r.record.bytesRecordedTargets),
          `${Math.ceil(r.record.bytesRecordedTargets / 1024)} write units a write`,
          `${round(r.record.bytesRecordedTargets / limit, 2)} of the limit`,
        ],
        [
          '… 4 ports, every target recorded (before)',
          kb(r.record.bytesRecordedTargetsFourPorts),
          'over the 400 KB limit: the record could not be written',
          `${round(r.record.bytesRecordedTargetsFourPorts / limit, 2)} of the limit`,
        ],
        [
          'host set',
          `${r.hostSet.chunks} chunks, ${kb(r.hostSet.bytes)}`,
          `${r.hostSet.readUnits} read units a full read`,
          '—',
        ],
        [
          "sweep's scan of the state table",
          `${r.sweep.pages} pages, ${kb(r.sweep.bytes)}, ${r.sweep.keys} keys`,
          `${r.sweep.readUnits} read units, ~${s(r.sweep.durationMs)} per pass`,
          '—',
        ],
      ],
    ),
    '',
    'Hot keys during the node change (DynamoDB serves up to 3,000 read units and 1,000 write units a second per partition, and a single item never spans partitions):',
    '',
    table(
      ['item', 'requests/s', 'units/s', 'partition limit', 'share'],
      r.hotKeys.map((h) => [
        h.key,
        round(h.perSecond, 1),
        round(h.unitsPerSecond, 1),
        h.limit,
        `${round((100 * h.unitsPerSecond) / h.limit, 1)} %`,
      ]),
    ),
    '',
    `What broke first, and what changed: (1) the record item. Every target group's target list was recorded, ~110 KB per group at ${m.nodes.toLocaleString('en')} nodes, so each record write cost over 200 write units and a Service with 4 ports could not be written at all. Lists longer than ${maxRecordedTargets} targets are no longer recorded; a host update reads such a group with one DescribeTargetHealth (the Describe bucket, 10/s, not the registration one). (2) Every host update read the whole host set (${r.hostSet.readUnits} read units): now the chunks, which are named by their content, are read once per function instance and the small meta item tells whether they changed. (3) Target diffs compared lists (millions of comparisons per group at ${m.nodes.toLocaleString('en')} nodes): now sets. Not measured here: the sweep's tagging scan (GetResources pages of 100 over ~${(m.services * 4).toLocaleString('en')} resources) and the forwarder (its own section).`,
  ].join('\n');
}

/** Writes latest.json, latest.md and the charts; returns the formatted markdown. */
export async function writeReport(results: BenchResults, dir: string): Promise<string> {
  mkdirSync(dir, { recursive: true });
  const format = async (text: string, file: string) => {
    const options = (await prettier.resolveConfig(file)) ?? {};
    return prettier.format(text, { ...options, filepath: file });
  };
  const markdown = await format(renderMarkdown(results), join(dir, 'latest.md'));
  writeFileSync(join(dir, 'latest.md'), markdown);
  writeFileSync(
    join(dir, 'latest.json'),
    await format(JSON.stringify(forJson(results)), join(dir, 'latest.json')),
  );
  for (const [name, svg] of Object.entries(charts(results))) writeFileSync(join(dir, name), svg);
  return markdown;
}
