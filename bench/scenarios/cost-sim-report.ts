/** The report's section on cost and bursts on the virtual clock (bench/scenarios/cost-sim.ts). */
import { money, ratio, s, table } from '../support/markdown';
import { round } from '../support/stats';
import { awsRateLimits } from '../sim/aws-limits';
import type { CostSimResult, PhaseBill } from './cost-sim';

/** Issue 37's goals: each event at most half of release 0.1's, and at most 5 % of Lambda time waiting. */
export const costSimGoals = { ratioTo01: 0.5, waitingShare: 0.05, throttledShare: 0.05 } as const;

export function costSimSection(r: CostSimResult): string {
  const find = (b: PhaseBill, layout: PhaseBill['layout']) =>
    r.bills.find((x) => x.phase === b.phase && x.services === b.services && x.layout === layout);
  const today = r.bills.filter((b) => b.layout === 'today');
  const rows = today.map((b) => {
    const old = find(b, 'release 0.1');
    const vs = old === undefined ? Number.NaN : b.perMillion / old.perMillion;
    const goal = old === undefined ? Number.NaN : old.perMillion * costSimGoals.ratioTo01;
    return [
      b.phase,
      b.services,
      `**${money(b.perMillion)}**`,
      old === undefined ? '—' : money(old.perMillion),
      Number.isNaN(vs) ? '—' : `${round(vs, 2)}×`,
      `≤ ${costSimGoals.ratioTo01}×`,
      vs <= costSimGoals.ratioTo01
        ? 'met'
        : goal < b.floorPerMillion
          ? 'not met: goal below the floor'
          : 'not met',
      money(b.floorPerMillion),
      `${round(b.perMillion / b.floorPerMillion, 2)}×`,
      `${round(b.waitingShare * 100, 1)} % (${b.waitingShare <= costSimGoals.waitingShare ? 'met' : 'not met'})`,
      old === undefined ? '—' : `${round(old.waitingShare * 100, 1)} %`,
      round(b.gbSeconds / b.services, 3),
      round(b.sqsRequests / b.services, 2),
      round(b.wru / b.services, 1),
      round(b.rru / b.services, 1),
      `${s(b.p50Ms)} / ${s(b.maxMs)}`,
      old === undefined ? '—' : `${s(old.p50Ms)} / ${s(old.maxMs)}`,
      `${b.throttled} of ${b.elbv2Ec2Attempts}`,
    ];
  });
  const restore = restoreSection(r);
  return [
    '## Cost and bursts on the virtual clock (issue 37)',
    '',
    "The real runtime over the bench's fakes (bench/sim/: queues with their event source mappings, the state table, the Kubernetes API and ELBv2/EC2 with AWS's token buckets; 50 ms per remote call), one Service's life in bursts of the sizes below: created, a node added, updated (a health-check annotation), deleted. Each phase runs until every Service converged and both queues are empty, so what comes back later (requeues, kept registration slots) is billed with it. Lambda is billed on the handler's virtual time (512 MB, arm64; bench/sim/meter.ts), SQS per request (the forwarder's sends included), DynamoDB per request unit (item sizes by AWS's rounding), at the prices of the cost section. The same run prices release 0.1's layout: one queue, no fleet budgets (registrations, Describe*, changes), each Service's lease on its record item (the record as JSON), and 0.1's clients (a sleeping per-process limiter and the SDK's adaptive retries). Both columns run today's provider and sync code, so the ratio measures the layout and the rate handling, not 0.1's code (which made more serial calls: a single event costs about the same in both layouts). This is the figure the docs quote; the moto-billed table below it moves with the machine's load.",
    '',
    'Waiting = the share of Lambda time with no remote call in flight (the simulated code itself takes no time): sleeps for a rate budget, a retry, a lease.',
    '',
    "Floor = what no layout of the state and the queues avoids with this sync code (`layoutFloor` in bench/scenarios/cost-sim.ts), a lower bound: the Lambda time in which the sync's own calls (ELBv2, EC2, Kubernetes) were in flight in this run, and per invocation two 50 ms state calls (the key taken with its record read, the record written as the key is released: one item, as 0.1 kept it); one invocation and three SQS requests (send, receive, delete) per batch of 10 events (a node change: its one message, whose invocation runs every host update); two write units per event. Both columns make the same sync calls, so where half of release 0.1's cost is below the floor, no layout meets the goal: the event's cost is its calls, not the layout's writes and hops.",
    '',
    table(
      [
        'event',
        'burst',
        '$ per million (now)',
        'release 0.1',
        'ratio',
        'goal',
        '',
        'floor',
        'ratio to floor',
        `waiting (now; goal ≤ ${costSimGoals.waitingShare * 100} %)`,
        'waiting (0.1)',
        'GB-s per event',
        'SQS req per event',
        'WRU per event',
        'RRU per event',
        'converged p50 / last (now)',
        'p50 / last (0.1)',
        'ELBv2+EC2 throttled (now)',
      ],
      rows,
    ),
    ...(restore === undefined ? [] : ['', restore]),
  ].join('\n');
}

/** The 1,000-Service create against the floor AWS's buckets give (issue 37, item 3). */
function restoreSection(r: CostSimResult): string | undefined {
  const largest = Math.max(...r.bursts);
  const create = r.bills.find(
    (b) => b.phase === 'create' && b.layout === 'today' && b.services === largest,
  );
  if (create === undefined || r.restore === undefined) return undefined;
  const bucket = awsRateLimits[r.restore.floorBucket];
  const throttled = create.elbv2Ec2Attempts === 0 ? 0 : create.throttled / create.elbv2Ec2Attempts;
  return [
    `### A restore: ${largest} LoadBalancer Services created at once`,
    '',
    `Floor: the calls one create makes of each of AWS's buckets (measured on the 1-Service create), for ${largest} Services, less the bucket's burst, at its refill rate; the slowest bucket sets it: ${bucket.applies}, ${bucket.capacity} tokens at ${bucket.refillPerSecond}/s (${bucket.source}).`,
    '',
    table(
      ['figure', 'measured', 'floor / goal', 'ratio', 'goal met'],
      [
        [
          'last Service converged',
          s(create.maxMs),
          s(r.restore.floorMs),
          ratio(create.maxMs, r.restore.floorMs),
          '—',
        ],
        ['p50 converged', s(create.p50Ms), '—', '—', '—'],
        [
          'throttled ELBv2/EC2 attempts',
          `${round(throttled * 100, 1)} % (${create.throttled} of ${create.elbv2Ec2Attempts})`,
          `≤ ${costSimGoals.throttledShare * 100} %`,
          '—',
          throttled <= costSimGoals.throttledShare ? 'met' : 'not met',
        ],
        [
          'Lambda time waiting',
          `${round(create.waitingShare * 100, 1)} %`,
          `≤ ${costSimGoals.waitingShare * 100} %`,
          '—',
          create.waitingShare <= costSimGoals.waitingShare ? 'met' : 'not met',
        ],
        ['cost per Service created', `${money(create.perMillion)} per million`, '—', '—', '—'],
      ],
    ),
  ].join('\n');
}
