/**
 * How the Lambda bundles are built: one definition, read by the stack (CDK's NodejsFunction) and by
 * the bundle benchmark (esbuild directly), so what is measured is what is deployed.
 *
 * - The AWS SDK is bundled (`@aws-sdk/*` is not left to the Lambda runtime's copy): the versions
 *   that run in AWS are the ones pinned in package-lock.json and exercised by the tests. The
 *   runtime's copy changes without notice and can be older than what our code calls.
 * - Packages' ES module builds first (`module` before `main`): the SDK's dist-es lets esbuild leave
 *   out the commands and shapes we never call, where its CommonJS build is one file kept whole
 *   (issue 21: service-sync went from 4.2 MiB to 1.4 MiB with this and client-node gone).
 * - No source map ships. Loading one at the first stack trace (`--enable-source-maps`) cost about
 *   a quarter of a second and a ten-megabyte parse in `npm run bench` (section "Lambda bundles");
 *   the bundle keeps function and class names instead, so a trace reads `at NlbProvider.ensure`.
 */
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
} as const;

/** The same options for esbuild's `build` (the benchmark builds without CDK). */
export function esbuildOptionsFor(entry: string, outfile: string) {
  return {
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node' as const,
    format: lambdaBundle.format,
    target: lambdaBundle.target,
    minify: lambdaBundle.minify,
    keepNames: lambdaBundle.keepNames,
    sourcemap: lambdaBundle.sourceMap,
    external: [...lambdaBundle.externalModules],
    banner: { js: lambdaBundle.banner },
    mainFields: [...lambdaBundle.mainFields],
  };
}
