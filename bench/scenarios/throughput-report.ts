/** The report's section on pipeline throughput (bench/scenarios/throughput.ts), and its chart. */
import { s, table, type Cell } from '../support/markdown';
import { round } from '../support/stats';
import { barChart } from '../support/svg';
import type { ThroughputResult } from './throughput';

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

export function throughputSection(
  t: ThroughputResult,
  inMemory: ThroughputResult | undefined,
): string {
  return [
    '## Pipeline throughput and sync latency',
    '',
    `Backend: **${t.backend}**. The real forwarder (in process), the real runtime (processWorkBatch) in ${t.concurrency} function instances (the event source mapping's maximum concurrency for the default budget), each with its own SDK clients and per-process limiter, all booking their ELBv2 calls on the fleet's shared budgets in the state table (registrations 4/s, Describe* 10/s, other changes 3/s: functions/aws/registration-budget.ts), as deployed; the event source mapping is emulated by pollers that long-poll the queue (batches of 10) and delete what succeeded. Before the first phase, node sync has stored the eligible host set (the forwarder's first Node messages, as within a minute of a deploy), so no phase pays for that one-off. Each phase writes ${t.services} events to the API server at once and waits until all are done: *create* until the Service status carries the NLB's DNS name, *update* (an annotation change) until the Service is synced again, *node added* until every Service's target groups have the new instance, *delete* until the Service is gone (NLB, target groups and security group deleted, finalizer released). End-to-end latency runs from the API write; sync latency is one sync pass (the runtime's SyncLatency metric). Events/s for *node added* counts host updates.`,
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

/** throughput.svg: end-to-end and sync latency per phase. */
export function throughputChart(t: ThroughputResult): Record<string, string> {
  return {
    'throughput.svg': barChart({
      title: `End-to-end and sync latency per phase (${t.services} Services, moto)`,
      categories: t.phases.map((ph) => ph.phase),
      series: [
        { name: 'end-to-end p50', values: t.phases.map((ph) => ph.e2eP50Ms / 1000) },
        { name: 'end-to-end p99', values: t.phases.map((ph) => ph.e2eP99Ms / 1000) },
        { name: 'sync p50', values: t.phases.map((ph) => ph.syncP50Ms / 1000) },
        { name: 'sync p99', values: t.phases.map((ph) => ph.syncP99Ms / 1000) },
      ],
      yLabel: 'seconds',
    }),
  };
}
