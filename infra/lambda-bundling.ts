/**
 * How the Lambda bundles are built: one definition, used by the stack (CDK's NodejsFunction runs
 * it after its own esbuild step, see `lambdaBundleHooks`), by the bundle benchmark and the tests,
 * so what is measured is what is deployed.
 *
 * - The AWS SDK is bundled (`@aws-sdk/*` is not left to the Lambda runtime's copy): the versions
 *   that run in AWS are the ones pinned in package-lock.json and exercised by the tests. The
 *   runtime's copy changes without notice and can be older than what our code calls.
 * - Packages' ES module builds first (`module` before `main`): the SDK's dist-es lets esbuild leave
 *   out the commands and shapes we never call, where its CommonJS build is one file kept whole
 *   (issue 21: service-sync went from 4.2 MiB to 1.4 MiB with this and client-node gone).
 * - The SDK's schema modules are rewritten on load so that tree shaking reaches them
 *   (infra/sdk-schema-keys.ts): the EC2 client's schemas went from 550 KiB to 20 KiB.
 * - Code splitting: what is only imported dynamically (the EKS and Secrets Manager clients, the
 *   credential providers Lambda never uses) lands in `chunks/` and is read only when called, so a
 *   cold start parses the entry and the chunks it imports statically, not the rest.
 * - No source map ships. Loading one at the first stack trace (`--enable-source-maps`) cost about
 *   a quarter of a second and a ten-megabyte parse in `npm run bench` (section "Lambda bundles");
 *   the bundle keeps function and class names instead, so a trace reads `at NlbProvider.ensure`.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BuildOptions } from 'esbuild';
import { inlineSdkSchemaKeys } from './sdk-schema-keys';

export const lambdaBundle = {
  format: 'esm',
  target: 'node24',
  minify: true,
  keepNames: true,
  sourceMap: false,
  /** Nothing is left to the runtime: the SDK included. */
  externalModules: [] as string[],
  mainFields: ['module', 'main'],
  // CommonJS dependencies left in the bundle expect `require` inside the ES module.
  banner:
    "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
  /** The handler's file in the output directory: Lambda's `index.handler`. */
  entryFile: 'index.mjs',
  chunkDir: 'chunks',
} as const;

/** esbuild's options for one function: `<outdir>/index.mjs` and its chunks in `<outdir>/chunks`. */
export function esbuildOptionsFor(entry: string, outdir: string) {
  return {
    entryPoints: [entry],
    outdir,
    entryNames: 'index',
    chunkNames: `${lambdaBundle.chunkDir}/[name]-[hash]`,
    outExtension: { '.js': '.mjs' },
    splitting: true,
    bundle: true,
    platform: 'node',
    format: lambdaBundle.format,
    target: lambdaBundle.target,
    minify: lambdaBundle.minify,
    keepNames: lambdaBundle.keepNames,
    sourcemap: lambdaBundle.sourceMap,
    external: [...lambdaBundle.externalModules],
    banner: { js: lambdaBundle.banner },
    mainFields: [...lambdaBundle.mainFields],
    plugins: [inlineSdkSchemaKeys],
  } satisfies BuildOptions;
}

/**
 * NodejsFunction's command hooks that replace its bundle with ours. CDK runs esbuild through its
 * command line, which takes neither plugins nor (with its `--outfile`) code splitting, so after its
 * step infra/bundle-lambda.ts builds the same entry with `esbuildOptionsFor` into the asset
 * directory, with the Node that runs the CDK app: from the TypeScript sources (a checkout) through
 * tsx, from the published package's compiled dist/ as its compiled copy on plain Node, so a
 * consumer's app needs no TypeScript loader.
 */
export function lambdaBundleHooks(entry: string) {
  const here = fileURLToPath(import.meta.url);
  const fromSources = here.endsWith('.ts');
  const node = fromSources
    ? [process.execPath, '--import', 'tsx', join(dirname(here), 'bundle-lambda.ts')]
    : [process.execPath, join(dirname(here), 'bundle-lambda.js')];
  return {
    beforeBundling: (): string[] => [],
    beforeInstall: (): string[] => [],
    afterBundling: (_inputDir: string, outputDir: string): string[] => [
      [...node, entry, outputDir].map((arg) => JSON.stringify(arg)).join(' '),
    ],
  };
}
