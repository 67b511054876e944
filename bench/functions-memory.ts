/**
 * `npm run bench:functions-memory`: BENCH_SERVICES (default 300) ClusterIP Services of
 * BENCH_BYTES (default 1,000,000) bytes of annotation each in one namespace, listed as the
 * tenant policy's count lists them: in pages of 50 read one item at a time and cut down to
 * summaries (now), and in whole 500-item pages keeping every object (before issue 32). Prints
 * each child's peak RSS against the functions' 512 MB (bench/scenarios/functions-memory.ts).
 * BENCH_CASE=summaries or BENCH_CASE=whole-pages runs only that one; BENCH_HEAP_MIB caps the
 * child's V8 heap (`--max-old-space-size`), to show how little the list must hold.
 */
import {
  functionMemoryMiB,
  functionsMemoryBench,
  type ListMode,
} from './scenarios/functions-memory';

const services = Number(process.env.BENCH_SERVICES ?? 300);
const bytesEach = Number(process.env.BENCH_BYTES ?? 1_000_000);
const only = process.env.BENCH_CASE;
const heapMiB =
  process.env.BENCH_HEAP_MIB === undefined ? undefined : Number(process.env.BENCH_HEAP_MIB);
const modes: ListMode[] =
  only === 'summaries' || only === 'whole-pages' ? [only] : ['summaries', 'whole-pages'];

const runs = await functionsMemoryBench({ services, bytesEach, modes, heapMiB });
console.log(
  `${services} ClusterIP Services of ${(bytesEach / 2 ** 20).toFixed(2)} MiB each in one namespace, listed by the functions (limit ${functionMemoryMiB} MiB)`,
);
console.table(
  runs.map((run) => ({
    list:
      run.mode === 'summaries' ? 'pages of 50, summaries (now)' : 'whole 500-item pages (before)',
    'peak RSS (MiB)': run.peakRssMiB,
    'RSS before the list (MiB)': run.baselineRssMiB ?? '—',
    'heap used, sampled (MiB)': run.heapUsedMiB ?? '—',
    'kept (KiB)': run.keptBytes === undefined ? '—' : Math.round(run.keptBytes / 1024),
    'wall (s)': run.seconds ?? '—',
    crashed: run.crashed === undefined ? 'no' : 'yes',
  })),
);
for (const run of runs) if (run.crashed !== undefined) console.log(`${run.mode}: ${run.crashed}`);
const summaries = runs.find((run) => run.mode === 'summaries');
const within =
  summaries === undefined ||
  (summaries.crashed === undefined && summaries.peakRssMiB < functionMemoryMiB);
console.log(
  JSON.stringify({
    ...Object.fromEntries(runs.map((run) => [`${run.mode}PeakRssMiB`, run.peakRssMiB])),
    limitMiB: functionMemoryMiB,
    within,
  }),
);
if (!within) process.exitCode = 1;
