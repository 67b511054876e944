import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { LongestFirst } from './test/support/longest-first.js';

// Most test files wait (on moto, the fake API server, a child process, a backoff) far more than
// they compute, so twice as many files run at once as there are cores: on a 2-core machine the
// whole suite takes about half the time it took one file at a time. VITEST_MAX_WORKERS overrides.
const maxWorkers = Number(process.env.VITEST_MAX_WORKERS ?? 2 * availableParallelism());

// The iam project evaluates the AWS calls integration, e2e and reliability record, so it runs
// after them: every project has a group order, since Vitest runs projects left at order 0 after
// all ordered groups.
const first = { groupOrder: 1 };

/** The projects whose AWS calls test/iam/ evaluates: moto for the run, and the call log. */
const recorded = {
  setupFiles: ['test/support/iam/record-calls.ts'],
  sequence: first,
};

export default defineConfig({
  test: {
    maxWorkers,
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        // Pure code and the repository's own rules: no AWS, no synth, no child process.
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'], sequence: first },
      },
      {
        // CDK synths of the construct and the app.
        test: { name: 'infra', include: ['test/infra/**/*.test.ts'], sequence: first },
      },
      {
        // The adapters against moto and the fake API server.
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/support/moto-global-setup.ts'],
          testTimeout: 30_000,
          hookTimeout: 30_000,
          ...recorded,
        },
      },
      {
        // Whole-system runs: the local CLI, the deployed bundles, an upgrade, the runtime end to end.
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/support/moto-global-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          ...recorded,
        },
      },
      {
        test: {
          name: 'reliability',
          include: ['test/reliability/**/*.test.ts'],
          globalSetup: ['test/reliability/support/global-setup.ts'],
          testTimeout: 300_000,
          hookTimeout: 30_000,
          ...recorded,
        },
      },
      {
        test: {
          name: 'iam',
          include: ['test/iam/**/*.test.ts'],
          testTimeout: 120_000,
          sequence: { groupOrder: 2 },
        },
      },
      {
        // npm pack, an npm install into a temporary project, and a synth that bundles three
        // functions: about a minute on a quiet machine.
        test: {
          name: 'package',
          include: ['test/package/**/*.test.ts'],
          testTimeout: 240_000,
          hookTimeout: 240_000,
          sequence: first,
        },
      },
    ],
  },
});
