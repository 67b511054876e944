import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { LongestFirst } from './test/support/longest-first.js';

// Most test files wait (on moto, the fake API server, a child process, a backoff) far more than
// they compute, so three times as many files run at once as there are cores: on a 2-core machine
// that keeps both cores busy (at twice the cores they idled a sixth of the run; at four times,
// timing-bound tests of the forwarder and node sync fail). VITEST_MAX_WORKERS overrides.
const maxWorkers = Number(process.env.VITEST_MAX_WORKERS ?? 3 * availableParallelism());

// The iam project evaluates the AWS calls integration, e2e and reliability record, so it runs
// after them: every project has a group order, since Vitest runs projects left at order 0 after
// all ordered groups.
const first = { groupOrder: 1 };

// A worker runs its files one after another in one module graph instead of a fresh process each:
// the SDK clients, client-node and CDK are loaded and transformed once per worker, which saved a
// quarter of the CPU of the integration project. Test files share no state through modules: each
// builds its own world in its own moto account, and the IAM recorder is set per file.
const isolate = false;

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
        test: { name: 'unit', isolate, include: ['test/unit/**/*.test.ts'], sequence: first },
      },
      {
        // CDK synths of the construct and the app.
        test: { name: 'infra', isolate, include: ['test/infra/**/*.test.ts'], sequence: first },
      },
      {
        // The adapters against moto and the fake API server.
        test: {
          name: 'integration',
          isolate,
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
          isolate,
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
          isolate,
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
          isolate,
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
          isolate,
          include: ['test/package/**/*.test.ts'],
          testTimeout: 240_000,
          hookTimeout: 240_000,
          sequence: first,
        },
      },
    ],
  },
});
