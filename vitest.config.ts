import { defineConfig } from 'vitest/config';

// The iam project evaluates the AWS calls integration and reliability record, so it runs after
// them: every project has a group order, since Vitest runs projects left at order 0 after all
// ordered groups when it has a single worker (as on a 2-core machine).
const first = { groupOrder: 1 };

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/infra/**/*.test.ts'],
          sequence: first,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/support/moto-global-setup.ts'],
          setupFiles: ['test/support/iam/record-calls.ts'],
          testTimeout: 30_000,
          hookTimeout: 30_000,
          sequence: first,
        },
      },
      {
        test: {
          name: 'reliability',
          include: ['test/reliability/**/*.test.ts'],
          globalSetup: ['test/reliability/support/global-setup.ts'],
          setupFiles: ['test/support/iam/record-calls.ts'],
          testTimeout: 300_000,
          hookTimeout: 30_000,
          sequence: first,
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
