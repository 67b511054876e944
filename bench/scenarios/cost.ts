/**
 * Cost per million events, from the counts the throughput run measured: SQS requests, Lambda
 * invocations and GB-seconds, DynamoDB read and write request units. Prices are us-east-1 list
 * prices (see `prices`); free tiers, CloudWatch and fixed costs are left out and named.
 */
import type { PhaseResult, ThroughputResult } from './throughput';

export const prices = {
  asOf: 'us-east-1 list prices as of late 2024 (DynamoDB on-demand after its 1 Nov 2024 price cut), from the public pricing pages https://aws.amazon.com/sqs/pricing/, https://aws.amazon.com/lambda/pricing/ and https://aws.amazon.com/dynamodb/pricing/on-demand/; re-check them before quoting',
  sqsPerRequest: 0.4e-6,
  lambdaPerRequest: 0.2e-6,
  lambdaArmPerGbSecond: 0.0000133334,
  dynamoPerWru: 0.625e-6,
  dynamoPerRru: 0.125e-6,
} as const;

export const costFormula =
  'cost per 1,000,000 events = 1,000,000 / E × (R_sqs × $0.40e-6 + I × $0.20e-6 + Σd × M/1024 × $0.0000133334 + WRU × $0.625e-6 + RRU × $0.125e-6), ' +
  'where, for a phase of E events: R_sqs = SQS requests (SendMessageBatch, non-empty ReceiveMessage, DeleteMessageBatch, ChangeMessageVisibility; one request per batch of ≤ 10), ' +
  'I = Lambda invocations, Σd = their summed duration in seconds, M = function memory in MB (512, infra/controller-stack.ts; arm64), WRU/RRU = DynamoDB on-demand request units';

export interface PhaseCost {
  readonly phase: PhaseResult['phase'];
  /** What one "event" is for this row. */
  readonly per: string;
  readonly perEvent: {
    readonly sqsRequests: number;
    readonly invocations: number;
    readonly gbSeconds: number;
    readonly wru: number;
    readonly rru: number;
  };
  /** Dollars per million events, by part and in total. */
  readonly perMillion: {
    readonly sqs: number;
    readonly lambdaRequests: number;
    readonly lambdaCompute: number;
    readonly dynamoWrites: number;
    readonly dynamoReads: number;
    readonly total: number;
  };
}

/**
 * Issue 21's figures for release 0.1's state layout (the lease on the ~2.5 KB record item, so
 * every lease write cost 3 units), $ per million events, and its goal: at most half of each.
 * `total`, `scaled` and `compute` come from one run, bench/results/latest.md at commit a7c66e2:
 * `total` billed Lambda on moto's durations (the issue's figures), `scaled` the same with Lambda
 * compute scaled to 50 ms per AWS call, `compute` the Lambda compute within `total`. `wru`, the
 * write units per event, is a7c66e2's throughput scenario run again with this tree's meter (which
 * also charges transactions) and warm-up (node sync's first host set stored before the create
 * phase), so both sides are counted alike; that run's totals (create $12.89, update $12.21,
 * delete $18.42) were within 4 % of the issue's.
 */
export const costBeforeLeaseSplit = {
  create: { total: 13.4, scaled: 6.76, wru: 8, compute: 7.57 },
  update: { total: 12.39, scaled: 8.86, wru: 12, compute: 4.29 },
  delete: { total: 18.37, scaled: 14.2, wru: 19.3, compute: 5.15 },
} as const;

/**
 * Lambda compute scaled to 50 ms per AWS call: duration × 50 ms ÷ the phase's mean moto call (a
 * rough lower bound where the per-process limiter or the registration budget makes calls wait,
 * since those waits do not shrink).
 */
export function scaledTotal(row: PhaseCost, motoCallMs: number): number {
  const factor = Math.min(1, 50 / Math.max(1, motoCallMs));
  return row.perMillion.total - row.perMillion.lambdaCompute * (1 - factor);
}

export const floorDefinition =
  'floor = the cost of what no state layout avoids: the measured SQS requests and Lambda invocations (each billed its 1 ms minimum), one write of the record item (its size in 1 KB units) and one strongly consistent read of it (1 unit)';

export interface CostGoal {
  readonly phase: keyof typeof costBeforeLeaseSplit;
  /** Release 0.1, Lambda billed on moto's durations: the figure. */
  readonly today: number;
  readonly goal: number;
  /** This run, billed the same way. */
  readonly now: number;
  /** Both with Lambda compute scaled to 50 ms per AWS call (`scaledTotal`). */
  readonly todayScaled: number;
  readonly nowScaled: number;
  /** DynamoDB write units per event, 0.1 and now: deterministic, whatever the machine's load. */
  readonly todayWru: number;
  readonly nowWru: number;
  /** 0.1's Lambda compute alone, billed on moto's durations: a goal below it needs less compute. */
  readonly todayCompute: number;
  readonly floor: number;
}

export interface CostResult {
  readonly prices: typeof prices;
  readonly formula: string;
  readonly memoryMiB: number;
  readonly rows: PhaseCost[];
  /** Each issue-21 figure beside its goal, today's value and the floor. */
  readonly goals: CostGoal[];
  /**
   * The create burst again with the shared registration budget off (each instance's own limiter,
   * as 0.1): billed and scaled totals and write units per event, when that run was made.
   */
  readonly createWithoutBudget?: {
    readonly total: number;
    readonly scaled: number;
    readonly wru: number;
    readonly motoCallMs: number;
  };
  readonly excluded: string[];
}

function sqsRequests(calls: Record<string, number>): number {
  return Object.entries(calls)
    .filter(([op]) => op.startsWith('SQS.'))
    .reduce((n, [, count]) => n + count, 0);
}

export function costOf(throughput: ThroughputResult, withoutBudget?: ThroughputResult): CostResult {
  const gb = throughput.memoryMiB / 1024;
  const rows = throughput.phases.map((phase) => phaseCost(phase, gb));
  const unbudgeted = withoutBudget?.phases.find((p) => p.phase === 'create');
  const unbudgetedCost = unbudgeted === undefined ? undefined : phaseCost(unbudgeted, gb);
  const goals = throughput.phases.flatMap((phase, i): CostGoal[] => {
    if (!(phase.phase in costBeforeLeaseSplit)) return [];
    const name = phase.phase as keyof typeof costBeforeLeaseSplit;
    const perEvent = rows[i]!.perEvent;
    const recordWru = Math.ceil(throughput.serviceItemBytes / 1024);
    const floor =
      1_000_000 *
      (perEvent.sqsRequests * prices.sqsPerRequest +
        perEvent.invocations * prices.lambdaPerRequest +
        perEvent.invocations * 0.001 * gb * prices.lambdaArmPerGbSecond +
        recordWru * prices.dynamoPerWru +
        prices.dynamoPerRru);
    const today = costBeforeLeaseSplit[name];
    return [
      {
        phase: name,
        today: today.total,
        goal: today.total / 2,
        now: rows[i]!.perMillion.total,
        todayScaled: today.scaled,
        nowScaled: scaledTotal(rows[i]!, phase.motoCallMs),
        todayWru: today.wru,
        nowWru: perEvent.wru,
        todayCompute: today.compute,
        floor,
      },
    ];
  });
  return {
    prices,
    formula: costFormula,
    memoryMiB: throughput.memoryMiB,
    rows,
    goals,
    ...(unbudgeted === undefined || unbudgetedCost === undefined
      ? {}
      : {
          createWithoutBudget: {
            total: unbudgetedCost.perMillion.total,
            scaled: scaledTotal(unbudgetedCost, unbudgeted.motoCallMs),
            wru: unbudgetedCost.perEvent.wru,
            motoCallMs: unbudgeted.motoCallMs,
          },
        }),
    excluded: [
      'free tiers (SQS 1 M requests, Lambda 1 M requests and 400,000 GB-s a month)',
      'CloudWatch Logs ingestion (~1 KB a invocation at $0.50/GB), EMF custom metrics, the dashboard and alarms',
      'idle event-source polling of an empty queue and the node-sync timer chain (fixed monthly costs, not per event)',
      'Lambda INIT billing of cold starts (billed since 2025-08-01; amortised over the invocations of an instance)',
      'ELBv2/EC2 API calls (free) and the load balancers themselves',
      'Kubernetes API and forwarder compute (in the cluster)',
      'lifecycle events, when a bus is configured (EventBridge PutEvents, $1.00 per million entries: about one entry per create, update or delete)',
      'the batching of these bursts of 50 events (about 0.2 invocations an event): events that arrive one at a time each take an invocation and its SQS requests',
    ],
  };
}

function phaseCost(phase: PhaseResult, gb: number): PhaseCost {
  // A node event is priced per host update it fans out to, so the rows compare.
  const events = phase.phase === 'node added' ? phase.syncs : phase.events;
  const perEvent = {
    sqsRequests: sqsRequests(phase.calls) / events,
    invocations: phase.invocations / events,
    gbSeconds: ((phase.lambdaMs / 1000) * gb) / events,
    wru: phase.wru / events,
    rru: phase.rru / events,
  };
  const million = 1_000_000;
  const parts = {
    sqs: million * perEvent.sqsRequests * prices.sqsPerRequest,
    lambdaRequests: million * perEvent.invocations * prices.lambdaPerRequest,
    lambdaCompute: million * perEvent.gbSeconds * prices.lambdaArmPerGbSecond,
    dynamoWrites: million * perEvent.wru * prices.dynamoPerWru,
    dynamoReads: million * perEvent.rru * prices.dynamoPerRru,
  };
  return {
    phase: phase.phase,
    per:
      phase.phase === 'node added'
        ? `host update (1 node event ÷ ${phase.syncs} Services, node sync included)`
        : `Service ${phase.phase} event`,
    perEvent,
    perMillion: { ...parts, total: Object.values(parts).reduce((a, b) => a + b, 0) },
  };
}
