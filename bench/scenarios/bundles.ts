/**
 * Each Lambda bundle's size and cold initialisation. The bundles are built with esbuild from the
 * options infra/lambda-bundling.ts defines, which the stack's NodejsFunction also builds with, so
 * what is measured is what deploys (the AWS SDK bundled, names kept, no source map, split into the
 * handler's file and chunks).
 *
 * Sizes: the handler's file; what its import reads (the file and the chunks it imports
 * statically: what every cold start parses, whatever the message); every file of the package
 * (chunks loaded on demand too, e.g. the EKS and Secrets Manager clients); and our own code among
 * what is loaded, the size floor if every dependency were free.
 *
 * Cold init: a fresh `node` process imports the bundle and reports the time from the import to
 * the handler export being available, and from process start to that point. For service-sync it
 * then invokes the handler once with an empty batch, which builds the runtime (configuration,
 * SDK clients, the lazy part of a cold start; no network call is made), and once with no event,
 * which throws: the time to read that first error's stack is what a source map would add to. The
 * import floor is an ES module with an empty handler, imported the same way in the same run.
 *
 * The alternative we did not ship is measured beside it: the same service-sync bundle with its
 * source map, run with `--enable-source-maps` (the choice of issue "Day one", item 9).
 *
 * Each bundle is also built with the AWS SDK left to the Lambda runtime (`@aws-sdk/*` external, as
 * CDK does by default), to show how much of what is left is the SDK (issue 21, item 4). Its
 * import then loads the SDK from node_modules, as the runtime's copy would be.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build, type Metafile } from 'esbuild';
import { esbuildOptionsFor } from '../../infra/lambda-bundling';
import { track } from '../support/children';
import { median } from '../support/stats';

export const lambdaFunctions = ['service-sync', 'node-sync', 'sweep'] as const;

export interface BundleResult {
  readonly name: (typeof lambdaFunctions)[number] | 'empty handler';
  /** The handler's file, index.mjs. */
  readonly bytes: number;
  /** What an import reads: the handler's file and the chunks it imports statically, transitively. */
  readonly loadedBytes: number;
  /** Every file of the package: the chunks imported on demand too. */
  readonly totalBytes: number;
  readonly chunks: number;
  /** Our own code (functions/**) among the loaded bytes: the size floor, all dependencies free. */
  readonly ownCodeBytes: number;
  /** gzip of every file of the package. */
  readonly gzipBytes: number;
  /** Bytes of the source maps, when the variant has them. */
  readonly sourceMapBytes?: number | undefined;
  /** Import of the bundle until the handler export is there, median of `runs`. */
  readonly importMs: number;
  /** Process start until the handler export is there (Node's bootstrap included), median. */
  readonly sinceStartMs: number;
  /** service-sync only: the first invocation (empty batch) that builds the runtime, median. */
  readonly firstInvokeMs?: number | undefined;
  /** service-sync only: reading the stack of the first error thrown inside the bundle, median. */
  readonly firstStackMs?: number | undefined;
  /** The first frame of that stack, as it reads in a log. */
  readonly stackFrame?: string | undefined;
  readonly runs: number;
}

/** Issue 21, item 4: the goals per bundle. */
export const bundleGoals = { maxKiB: 600, maxImportMs: 250 } as const;
export const bundleBaseline = { label: 'service-sync before issue 21', kib: 4232, importMs: 857 };
/**
 * "Today" for issue 21 item 4: bench/results/latest.md as of commit 8cfd77f (client-node gone,
 * `module` first, one file per function, EC2 schemas kept whole), same machine.
 */
export const bundleToday: Record<
  (typeof lambdaFunctions)[number],
  Record<'bundled' | 'external', { readonly kib: number; readonly importMs: number }>
> = {
  'service-sync': { bundled: { kib: 1473, importMs: 351 }, external: { kib: 317, importMs: 493 } },
  'node-sync': { bundled: { kib: 1440, importMs: 335 }, external: { kib: 284, importMs: 623 } },
  sweep: { bundled: { kib: 1440, importMs: 309 }, external: { kib: 284, importMs: 626 } },
};

export interface BundlesResult {
  readonly node: string;
  readonly esbuild: string;
  readonly options: string;
  readonly functions: BundleResult[];
  /** The same bundles with `@aws-sdk/*` external (not deployed so: measured to compare). */
  readonly withoutSdk?: BundleResult[] | undefined;
  /** service-sync with its source map and `--enable-source-maps`: not shipped, measured to compare. */
  readonly withSourceMaps: BundleResult;
  /** An ES module exporting an empty handler, imported the same way: the import floor. */
  readonly floor?: BundleResult | undefined;
  /**
   * service-sync as deployed and as built before this work (one file, SDK schemas as published),
   * imported alternately in this run, so that the machine's load weighs on both alike.
   */
  readonly todayPair?:
    | { readonly currentMs: number; readonly todayMs: number; readonly todayBytes: number }
    | undefined;
}

const outRoot = 'node_modules/.cache/serverless-service-controller-bench/bundles';

/** What the stack puts in CONTROLLER_CONFIG (EKS mode, endpoint and CA given: nothing is looked up). */
const deployedConfig = {
  clusterName: 'bench',
  region: 'us-east-1',
  queueUrl: 'https://sqs.us-east-1.amazonaws.com/123456789012/work',
  tableName: 'state',
  aws: { vpcId: 'vpc-0123456789abcdef0', backendSecurityGroupId: 'sg-0123456789abcdef0' },
  kubernetes: {
    mode: 'eks',
    clusterName: 'bench',
    endpoint: 'https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com',
    certificateAuthorityData: Buffer.from('-----BEGIN CERTIFICATE-----\n').toString('base64'),
  },
};

const probe = `
const started = performance.now();
const module = await import(process.env.BENCH_BUNDLE_URL);
const ready = performance.now();
if (typeof module.handler !== 'function') throw new Error('no handler export');
let firstInvokeMs = null;
let firstStackMs = null;
let stackFrame = null;
if (process.env.BENCH_INVOKE === '1') {
  const t = performance.now();
  await module.handler({ Records: [] });
  firstInvokeMs = performance.now() - t;
  const s = performance.now();
  try {
    await module.handler(undefined);
  } catch (error) {
    stackFrame = String(error.stack).split('\\n')[1].trim();
  }
  firstStackMs = performance.now() - s;
}
console.log('BENCH_RESULT ' + JSON.stringify({ importMs: ready - started, sinceStartMs: ready, firstInvokeMs, firstStackMs, stackFrame }));
`;

interface ProbeResult {
  importMs: number;
  sinceStartMs: number;
  firstInvokeMs: number | null;
  firstStackMs: number | null;
  stackFrame: string | null;
}

function runProbe(bundle: string, invoke: boolean, nodeFlags: string[]): Promise<ProbeResult> {
  return new Promise((resolve, reject) => {
    const child = track(
      spawn(process.execPath, [...nodeFlags, '--input-type=module', '-e', probe], {
        env: {
          PATH: process.env.PATH ?? '',
          AWS_REGION: 'us-east-1',
          AWS_ACCESS_KEY_ID: 'x',
          AWS_SECRET_ACCESS_KEY: 'x',
          CONTROLLER_CONFIG: JSON.stringify(deployedConfig),
          BENCH_BUNDLE_URL: pathToFileURL(bundle).href,
          BENCH_INVOKE: invoke ? '1' : '0',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      const line = output.split('\n').find((l) => l.startsWith('BENCH_RESULT '));
      if (code !== 0 || line === undefined) {
        reject(new Error(`cold-init probe of ${bundle} failed (${code}):\n${output.slice(-2000)}`));
        return;
      }
      resolve(JSON.parse(line.slice('BENCH_RESULT '.length)) as ProbeResult);
    });
  });
}

/** The output files an import of `entry` reads: itself and its static imports, transitively. */
function loadedAtImport(outputs: Metafile['outputs'], entry: string): string[] {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const i of outputs[file]?.imports ?? []) {
      if (i.kind === 'import-statement' && !i.external) visit(i.path);
    }
  };
  visit(entry);
  return [...seen];
}

async function measureOne(
  name: BundleResult['name'],
  dir: string,
  runs: number,
  variant: { sourceMap: boolean; nodeFlags: string[]; sdkExternal?: boolean },
): Promise<BundleResult> {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const entry =
    name === 'empty handler' ? writeEmptyHandler(dir) : join('functions', name, 'handler.ts');
  const { metafile } = await build({
    ...esbuildOptionsFor(entry, dir),
    ...(variant.sourceMap ? { sourcemap: true } : {}),
    ...(variant.sdkExternal ? { external: ['@aws-sdk/*'] } : {}),
    metafile: true,
    logLevel: 'error',
  });
  const outfile = join(dir, 'index.mjs');
  const code = Object.keys(metafile.outputs).filter((file) => file.endsWith('.mjs'));
  const loaded = loadedAtImport(metafile.outputs, relative(process.cwd(), outfile));
  const bytesOf = (files: string[]) =>
    files.reduce((total, file) => total + statSync(file).size, 0);
  const ownCodeBytes = loaded
    .flatMap((file) => Object.entries(metafile.outputs[file]?.inputs ?? {}))
    .filter(([input]) => input.startsWith('functions/'))
    .reduce((total, [, input]) => total + input.bytesInOutput, 0);
  const invoke = name === 'service-sync';
  // One unmeasured run first, so every measured run finds the files in the page cache.
  await runProbe(outfile, false, variant.nodeFlags);
  const samples: ProbeResult[] = [];
  for (let i = 0; i < runs; i++) samples.push(await runProbe(outfile, invoke, variant.nodeFlags));
  const medianOf = (pick: (s: ProbeResult) => number | null) => {
    const values = samples.flatMap((s) => {
      const value = pick(s);
      return value === null ? [] : [value];
    });
    return values.length > 0 ? median(values) : undefined;
  };
  const maps = Object.keys(metafile.outputs).filter((file) => file.endsWith('.map'));
  return {
    name,
    bytes: statSync(outfile).size,
    loadedBytes: bytesOf(loaded),
    totalBytes: bytesOf(code),
    chunks: code.length - 1,
    ownCodeBytes,
    gzipBytes: gzipSync(Buffer.concat(code.map((file) => readFileSync(file))), { level: 9 }).length,
    sourceMapBytes: variant.sourceMap ? bytesOf(maps) : undefined,
    importMs: median(samples.map((s) => s.importMs)),
    sinceStartMs: median(samples.map((s) => s.sinceStartMs)),
    firstInvokeMs: medianOf((s) => s.firstInvokeMs),
    firstStackMs: medianOf((s) => s.firstStackMs),
    stackFrame: samples[0]?.stackFrame?.replace(/\(.*[\\/]/, '(') ?? undefined,
    runs,
  };
}

/** The import floor: an ES module with an empty handler and nothing else. */
function writeEmptyHandler(dir: string): string {
  const file = join(dir, 'empty-handler.mjs');
  writeFileSync(file, 'export const handler = async () => ({});\n');
  return file;
}

/** service-sync built as at commit 8cfd77f and the deployed build, imported turn about. */
async function againstToday(
  current: string,
  runs: number,
): Promise<NonNullable<BundlesResult['todayPair']>> {
  const dir = join(outRoot, 'as-today');
  rmSync(dir, { recursive: true, force: true });
  await build({
    ...esbuildOptionsFor(join('functions', 'service-sync', 'handler.ts'), dir),
    // Today's build: one file, the SDK's schema modules as published.
    splitting: false,
    plugins: [],
    logLevel: 'error',
  });
  const today = join(dir, 'index.mjs');
  await runProbe(today, false, []);
  const currentMs: number[] = [];
  const todayMs: number[] = [];
  for (let i = 0; i < runs; i++) {
    currentMs.push((await runProbe(current, false, [])).importMs);
    todayMs.push((await runProbe(today, false, [])).importMs);
  }
  return {
    currentMs: median(currentMs),
    todayMs: median(todayMs),
    todayBytes: statSync(today).size,
  };
}

export async function measureBundles(runs = 5): Promise<BundlesResult> {
  const functions: BundleResult[] = [];
  for (const name of lambdaFunctions) {
    functions.push(
      await measureOne(name, join(outRoot, name), runs, { sourceMap: false, nodeFlags: [] }),
    );
  }
  const withoutSdk: BundleResult[] = [];
  for (const name of lambdaFunctions) {
    withoutSdk.push(
      await measureOne(name, join(outRoot, 'without-sdk', name), runs, {
        sourceMap: false,
        nodeFlags: [],
        sdkExternal: true,
      }),
    );
  }
  const withSourceMaps = await measureOne('service-sync', join(outRoot, 'with-source-maps'), runs, {
    sourceMap: true,
    nodeFlags: ['--enable-source-maps'],
  });
  const floor = await measureOne('empty handler', join(outRoot, 'floor'), runs, {
    sourceMap: false,
    nodeFlags: [],
  });
  const todayPair = await againstToday(join(outRoot, 'service-sync', 'index.mjs'), runs);
  const esbuildVersion = (
    JSON.parse(readFileSync('node_modules/esbuild/package.json', 'utf8')) as { version: string }
  ).version;
  return {
    node: process.version,
    esbuild: esbuildVersion,
    options:
      'esbuild --bundle --splitting --platform=node --format=esm --target=node24 --main-fields=module,main --minify --keep-names --banner:js=<createRequire>, the SDK schemas made tree-shakable (infra/sdk-schema-keys.ts), the AWS SDK bundled, no source map (infra/lambda-bundling.ts)',
    functions,
    withoutSdk,
    withSourceMaps,
    floor,
    todayPair,
  };
}
