/**
 * `tsx infra/bundle-lambda.ts <entry> <outdir>`: builds one Lambda function's bundle as
 * infra/lambda-bundling.ts defines it, replacing what was in `<outdir>` (CDK's own single-file
 * bundle, when run from the NodejsFunction's afterBundling hook).
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { esbuildOptionsFor, lambdaBundle } from './lambda-bundling';

const [entry, outdir] = process.argv.slice(2);
if (entry === undefined || outdir === undefined) {
  console.error('usage: tsx infra/bundle-lambda.ts <entry> <outdir>');
  process.exit(2);
}
rmSync(join(outdir, lambdaBundle.entryFile), { force: true });
rmSync(join(outdir, lambdaBundle.chunkDir), { recursive: true, force: true });
await build({ ...esbuildOptionsFor(entry, outdir), logLevel: 'error' });
