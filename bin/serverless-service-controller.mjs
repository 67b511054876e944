#!/usr/bin/env node
// The CLI is TypeScript run through tsx, so `npm start` and this command run the same source. The
// Kubernetes client needs Node 22 or later: on an older `node`, the project's pinned Node 24 (the
// `node` dev dependency, which npm scripts use too) runs it instead.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
let node = process.execPath;
if (Number(process.versions.node.split('.')[0]) < 22) {
  try {
    node = join(dirname(require.resolve('node/package.json')), 'bin', 'node');
  } catch {
    process.stderr.write('serverless-service-controller needs Node.js 22 or later.\n');
    process.exit(2);
  }
}
const result = spawnSync(
  node,
  [require.resolve('tsx/cli'), join(root, 'functions/local/cli.ts'), ...process.argv.slice(2)],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
