#!/usr/bin/env node
// The CLI is TypeScript run through tsx (a dependency of the checkout), so `npm start` and this
// command run the same source.
import { spawnSync } from 'node:child_process';
import process from 'node:process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsx = createRequire(import.meta.url).resolve('tsx/cli');
const result = spawnSync(
  process.execPath,
  [tsx, join(root, 'functions/local/cli.ts'), ...process.argv.slice(2)],
  {
    stdio: 'inherit',
  },
);
process.exit(result.status ?? 1);
