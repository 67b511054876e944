import { writeFileSync } from 'node:fs';
import type { TestProject } from 'vitest/node';
import motoSetup from '../../support/moto-global-setup';
import { clearScenarios, scenarioTable, summaryPath } from './summary';

/** moto for the run, and at its end the summary table, printed and written. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  clearScenarios();
  const stopMoto = await motoSetup(project);
  return async () => {
    await stopMoto();
    const { results, markdown } = scenarioTable();
    if (results.length === 0) return;
    // A partial run (one file, a -t filter) prints its rows but leaves the full table alone.
    const complete = results.length >= expectedScenarios;
    if (complete) writeFileSync(summaryPath, markdown);
    process.stdout.write(`\n${markdown}\n${complete ? `(written to ${summaryPath})\n` : ''}`);
    clearScenarios();
  };
}

/** How many scenarios the suite records; a run with fewer does not overwrite the table. */
const expectedScenarios = Number(process.env.RELIABILITY_SCENARIOS ?? 11);
