/**
 * Each Lambda bundle's size and cold initialisation. The bundles are built with esbuild the way
 * infra/controller-stack.ts has CDK's NodejsFunction build them for nodejs24.x: bundle, platform
 * node, format esm, target node24, minify, sourcemap, the createRequire banner, and `@aws-sdk/*`
 * left external (CDK's default for Node ≥ 18 runtimes, whose runtime provides SDK v3).
 *
 * Cold init: a fresh `node` process imports the bundle and reports the time from the import to
 * the handler export being available, and from process start to that point. For service-sync it
 * then invokes the handler once with an empty batch, which builds the runtime (configuration,
 * SDK clients, the lazy part of a cold start; no network call is made).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { track } from '../support/children';
import { median } from '../support/stats';

export const lambdaFunctions = ['service-sync', 'node-sync', 'sweep'] as const;

export interface BundleResult {
  readonly name: (typeof lambdaFunctions)[number];
  readonly bytes: number;
  readonly gzipBytes: number;
  readonly sourceMapBytes: number;
  /** Import of the bundle until the handler export is there, median of `runs`. */
  readonly importMs: number;
  /** Process start until the handler export is there (Node's bootstrap included), median. */
  readonly sinceStartMs: number;
  /** service-sync only: the first invocation (empty batch) that builds the runtime, median. */
  readonly firstInvokeMs?: number | undefined;
  readonly runs: number;
}

export interface BundlesResult {
  readonly node: string;
  readonly esbuild: string;
  readonly options: string;
  readonly functions: BundleResult[];
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
if (process.env.BENCH_INVOKE === '1') {
  const t = performance.now();
  await module.handler({ Records: [] });
  firstInvokeMs = performance.now() - t;
}
console.log('BENCH_RESULT ' + JSON.stringify({ importMs: ready - started, sinceStartMs: ready, firstInvokeMs }));
`;

function runProbe(
  bundle: string,
  invoke: boolean,
): Promise<{ importMs: number; sinceStartMs: number; firstInvokeMs: number | null }> {
  return new Promise((resolve, reject) => {
    const child = track(
      spawn(process.execPath, ['--input-type=module', '-e', probe], {
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
      resolve(
        JSON.parse(line.slice('BENCH_RESULT '.length)) as {
          importMs: number;
          sinceStartMs: number;
          firstInvokeMs: number | null;
        },
      );
    });
  });
}

export async function measureBundles(runs = 5): Promise<BundlesResult> {
  const functions: BundleResult[] = [];
  for (const name of lambdaFunctions) {
    const dir = join(outRoot, name);
    mkdirSync(dir, { recursive: true });
    const outfile = join(dir, 'index.mjs');
    await build({
      entryPoints: [join('functions', name, 'handler.ts')],
      outfile,
      bundle: true,
      platform: 'node',
      target: 'node24',
      format: 'esm',
      minify: true,
      sourcemap: true,
      external: ['@aws-sdk/*'],
      banner: {
        js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
      },
      logLevel: 'error',
    });
    const code = readFileSync(outfile);
    const samples = [];
    // One unmeasured run first, so every measured run finds the files in the page cache.
    await runProbe(outfile, false);
    for (let i = 0; i < runs; i++) samples.push(await runProbe(outfile, name === 'service-sync'));
    const firstInvoke = samples.flatMap((s) => (s.firstInvokeMs === null ? [] : [s.firstInvokeMs]));
    functions.push({
      name,
      bytes: code.length,
      gzipBytes: gzipSync(code, { level: 9 }).length,
      sourceMapBytes: statSync(`${outfile}.map`).size,
      importMs: median(samples.map((s) => s.importMs)),
      sinceStartMs: median(samples.map((s) => s.sinceStartMs)),
      firstInvokeMs: firstInvoke.length > 0 ? median(firstInvoke) : undefined,
      runs,
    });
  }
  const esbuildVersion = (
    JSON.parse(readFileSync('node_modules/esbuild/package.json', 'utf8')) as { version: string }
  ).version;
  return {
    node: process.version,
    esbuild: esbuildVersion,
    options:
      'esbuild --bundle --platform=node --format=esm --target=node24 --minify --sourcemap --external:@aws-sdk/* --banner:js=<createRequire> (as CDK NodejsFunction for nodejs24.x in infra/controller-stack.ts)',
    functions,
  };
}
