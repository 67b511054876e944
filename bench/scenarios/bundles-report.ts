/**
 * The report's section on the Lambda bundles and their cold initialisation
 * (bench/scenarios/bundles.ts).
 */
import { table } from '../support/markdown';
import { round } from '../support/stats';
import {
  bundleBaseline,
  bundleGoals,
  bundleToday,
  type BundleResult,
  type BundlesResult,
} from './bundles';

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
