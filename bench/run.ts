/**
 * `npm run bench`: the benchmark suite. Runs every section, writes bench/results/latest.json,
 * latest.md and SVG charts, and prints the tables. One moto server serves the sections that need
 * AWS; it is stopped on the way out, also on failure or Ctrl-C. A failed section is reported and
 * the others still run; the exit code is then non-zero.
 *
 * Sizes: BENCH_THROUGHPUT_SERVICES (default 50), BENCH_SERVICES / BENCH_NODES for the forwarder
 * (default 10,000 / 5,000), BENCH_COLD_RUNS (default 5), BENCH_COST_BURSTS (default 1,50,1000).
 *
 * `npm run bench -- --only throughput,cost` runs only the named sections (calls, propagation,
 * cost-sim, throughput, "throughput (in-memory provider)", forwarder, bundles, cost; cost needs
 * throughput)
 * and prints their tables without touching bench/results, which hold a full run.
 */
import { cpus, loadavg, totalmem } from 'node:os';
import { startMotoServer, type MotoServer } from '../functions/local/moto-server';
import { renderMarkdown, writeReport, type BenchResults } from './report';
import { killTracked } from './support/children';
import { measureBundles } from './scenarios/bundles';
import { measureCalls } from './scenarios/calls';
import { costOf } from './scenarios/cost';
import { costSim } from './scenarios/cost-sim';
import { forwarderBench } from './scenarios/forwarder';
import { propagation } from './scenarios/propagation';
import { scale } from './scenarios/scale';
import { throughput } from './scenarios/throughput';

const sizes = {
  throughputServices: Number(process.env.BENCH_THROUGHPUT_SERVICES ?? 50),
  forwarderServices: Number(process.env.BENCH_SERVICES ?? 10_000),
  forwarderNodes: Number(process.env.BENCH_NODES ?? 5_000),
  coldRuns: Number(process.env.BENCH_COLD_RUNS ?? 5),
  // 1,000 is the restore of issue 37 (item 3): minutes of simulation, so on request.
  costSimBursts: (process.env.BENCH_COST_BURSTS ?? '1,50,1000').split(',').map(Number),
};

const onlyAt = process.argv.indexOf('--only');
const only =
  onlyAt < 0
    ? undefined
    : new Set((process.argv[onlyAt + 1] ?? '').split(',').map((s) => s.trim()));

let moto: MotoServer | undefined;
const stopMoto = async () => {
  const server = moto;
  moto = undefined;
  await server?.stop();
};
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: stopping moto and child processes`);
    killTracked();
    void stopMoto().finally(() => process.exit(130));
  });
}

const started = performance.now();
const sectionSeconds: Record<string, number> = {};
const errors: { section: string; message: string }[] = [];
const output: {
  -readonly [K in keyof BenchResults]?: BenchResults[K];
} = {};

async function section<T>(name: string, run: () => Promise<T>): Promise<T | undefined> {
  if (only !== undefined && !only.has(name)) return undefined;
  const t = performance.now();
  console.error(`bench: ${name}…`);
  try {
    return await run();
  } catch (error) {
    const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
    console.error(`bench: ${name} failed: ${message}`);
    errors.push({ section: name, message });
    return undefined;
  } finally {
    sectionSeconds[name] = (performance.now() - t) / 1000;
  }
}

const loadAverage = loadavg();
try {
  moto = await startMotoServer();
  const endpoint = moto.endpoint;
  output.calls = await section('calls', () => measureCalls(endpoint));
  output.propagation = await section('propagation', () => propagation([1, 100, 1000]));
  output.costSim = await section('cost-sim', () => costSim(sizes.costSimBursts));
  output.throughput = await section('throughput', () =>
    throughput(endpoint, { services: sizes.throughputServices }),
  );
  output.throughputInMemory = await section('throughput (in-memory provider)', () =>
    throughput(endpoint, { services: sizes.throughputServices, provider: 'in-memory' }),
  );
  output.throughputWithoutBudget = await section('throughput (create without budget)', () =>
    throughput(endpoint, { services: sizes.throughputServices, createWithoutBudget: true }),
  );
  output.forwarder = await section('forwarder', () =>
    forwarderBench(endpoint, { services: sizes.forwarderServices, nodes: sizes.forwarderNodes }),
  );
  await stopMoto();
  output.scale = await section('scale', () => scale());
  output.bundles = await section('bundles', () => measureBundles(sizes.coldRuns));
  const measured = output.throughput;
  if (measured !== undefined)
    output.cost = await section('cost', () =>
      Promise.resolve(costOf(measured, output.throughputWithoutBudget)),
    );
} finally {
  killTracked();
  await stopMoto();
}

const results: BenchResults = {
  generatedAt: new Date().toISOString(),
  machine: {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    loadAverage,
    node: process.version,
  },
  totalSeconds: (performance.now() - started) / 1000,
  sectionSeconds,
  errors,
  ...output,
};
if (only !== undefined) {
  console.log(renderMarkdown(results));
  console.log(`Only ${[...only].join(', ')}: bench/results left as they were.`);
} else {
  const markdown = await writeReport(results, 'bench/results');
  console.log(markdown);
  console.log('Written: bench/results/latest.md, latest.json and *.svg');
}
if (errors.length > 0) process.exitCode = 1;
