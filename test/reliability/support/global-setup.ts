import { writeFileSync } from 'node:fs';
import * as prettier from 'prettier';
import type { TestProject } from 'vitest/node';
import motoSetup from '../../support/moto-global-setup';
import { clearScenarios, scenarioNames, scenarioTable, summaryPath } from './summary';

/** moto for the run, and at its end the summary table, printed and written. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  clearScenarios();
  const stopMoto = await motoSetup(project);
  return async () => {
    await stopMoto();
    const { results, markdown } = scenarioTable();
    if (results.length === 0) return;
    // A partial run (one file, a -t filter) prints its rows but leaves the full table alone.
    const complete = scenarioNames.every((name) => results.some((r) => r.scenario === name));
    if (complete) {
      // Formatted as the repository's format check expects, so a run leaves the tree clean.
      const options = (await prettier.resolveConfig(summaryPath)) ?? {};
      writeFileSync(
        summaryPath,
        await prettier.format(markdown, { ...options, filepath: summaryPath }),
      );
    }
    process.stdout.write(`\n${markdown}\n${complete ? `(written to ${summaryPath})\n` : ''}`);
    clearScenarios();
  };
}
