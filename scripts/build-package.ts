/**
 * `npm run build` (and `npm pack`, through `prepack`): the published package's compiled JavaScript
 * in dist/, so that a CDK app needs no TypeScript loader to use the construct:
 *
 * - `index.js` (ES module) and `index.cjs` (CommonJS, for `require` and for CommonJS TypeScript
 *   apps such as `cdk init`'s), one declaration file for both (`index.d.ts`, `index.d.cts`);
 * - `bundle-lambda.js`, which the construct runs at synth to bundle the functions from the
 *   package's TypeScript sources with esbuild (infra/lambda-bundling.ts);
 * - `cli/`, the command line (bin/ runs it), split so that the commands that need the optional
 *   Kubernetes client load it only when run.
 *
 * Dependencies stay imports (`packages: 'external'`): the consumer's node_modules provides them,
 * deduplicated with its own aws-cdk-lib and constructs.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Extractor, ExtractorConfig, ExtractorLogLevel } from '@microsoft/api-extractor';
import { build, type BuildOptions } from 'esbuild';
import { packageRoot } from '../functions/package/package-root';

const root = packageRoot();
const dist = join(root, 'dist');
const declarations = join(dist, '.declarations');

/** Node 22 is the oldest the package supports (package.json `engines`). */
const common = {
  bundle: true,
  platform: 'node',
  target: 'node22',
  packages: 'external',
  keepNames: true,
  logLevel: 'warning',
  absWorkingDir: root,
} satisfies BuildOptions;

rmSync(dist, { recursive: true, force: true });

const tsc = spawnSync(
  process.execPath,
  [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.declarations.json'],
  // Reports go to stderr: `npm pack --json` runs this and its stdout must stay JSON.
  { cwd: root, stdio: ['ignore', process.stderr, process.stderr] },
);
if (tsc.status !== 0) throw new Error('tsc could not emit the declarations');

// One declaration file: tsc's own output keeps the sources' extensionless relative imports,
// which TypeScript refuses under NodeNext resolution (TS2835).
const extracted = Extractor.invoke(
  ExtractorConfig.prepare({
    configObjectFullPath: undefined,
    packageJsonFullPath: join(root, 'package.json'),
    configObject: {
      projectFolder: root,
      mainEntryPointFilePath: join(declarations, 'infra/index.d.ts'),
      compiler: { tsconfigFilePath: join(root, 'tsconfig.declarations.json') },
      apiReport: { enabled: false },
      docModel: { enabled: false },
      tsdocMetadata: { enabled: false },
      dtsRollup: { enabled: true, untrimmedFilePath: join(dist, 'index.d.ts') },
      messages: {
        compilerMessageReporting: { default: { logLevel: ExtractorLogLevel.Warning } },
        extractorMessageReporting: {
          default: { logLevel: ExtractorLogLevel.Warning },
          // Release tags (@public, @beta) are a convention this package does not use.
          'ae-missing-release-tag': { logLevel: ExtractorLogLevel.None },
          // Types the props name but the entry point does not export are inlined, as wanted.
          'ae-forgotten-export': { logLevel: ExtractorLogLevel.None },
        },
        tsdocMessageReporting: { default: { logLevel: ExtractorLogLevel.None } },
      },
    },
  }),
  {
    localBuild: true,
    showVerboseMessages: false,
    messageCallback: (message) => {
      message.handled = true;
      if (
        message.logLevel === ExtractorLogLevel.Error ||
        message.logLevel === ExtractorLogLevel.Warning
      ) {
        process.stderr.write(`${message.formatMessageWithLocation(root)}\n`);
      }
    },
  },
);
if (!extracted.succeeded) throw new Error('api-extractor could not roll up the declarations');
copyFileSync(join(dist, 'index.d.ts'), join(dist, 'index.d.cts'));
rmSync(declarations, { recursive: true, force: true });

await Promise.all([
  build({
    ...common,
    entryPoints: { index: 'infra/index.ts', 'bundle-lambda': 'infra/bundle-lambda.ts' },
    outdir: dist,
    format: 'esm',
  }),
  build({
    ...common,
    entryPoints: { index: 'infra/index.ts' },
    outdir: dist,
    outExtension: { '.js': '.cjs' },
    format: 'cjs',
    define: { 'import.meta.url': 'importMetaUrl' },
    inject: [join(root, 'scripts/cjs-shims.ts')],
  }),
  build({
    ...common,
    entryPoints: { cli: 'functions/local/cli.ts' },
    outdir: join(dist, 'cli'),
    chunkNames: 'chunks/[name]-[hash]',
    format: 'esm',
    splitting: true,
  }),
]);
