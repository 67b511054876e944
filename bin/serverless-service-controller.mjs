#!/usr/bin/env node
// The published package runs its compiled CLI (dist/cli/cli.js, `npm run build`); a checkout runs
// the TypeScript source through tsx, as `npm start` does, so no stale build is ever run there. The
// Kubernetes client needs Node 22 or later: in a checkout on an older `node`, the project's pinned
// Node 24 (the `node` dev dependency, which npm scripts use too) runs it instead.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const sources = join(root, 'functions/local/cli.ts');
const entry = existsSync(sources)
  ? [require.resolve('tsx/cli'), sources]
  : [join(root, 'dist/cli/cli.js')];
let node = process.execPath;
if (Number(process.versions.node.split('.')[0]) < 22) {
  try {
    node = join(dirname(require.resolve('node/package.json')), 'bin', 'node');
  } catch {
    process.stderr.write('serverless-service-controller needs Node.js 22 or later.\n');
    process.exit(2);
  }
}
const result = spawnSync(node, [...entry, ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(result.status ?? 1);
