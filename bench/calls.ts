/**
 * `npm run bench:calls`: AWS calls per scenario for one Service (2 ports, 3 nodes), against moto,
 * through the real use cases and the real NLB provider (bench/scenarios/calls.ts). Prints a table
 * and a JSON line; fails when a scenario is over its docs/design.md §5 budget. `npm run bench`
 * runs the same measurement as part of the whole suite.
 */
import { startMotoServer } from '../functions/local/moto-server';
import { anchors, measureCalls } from './scenarios/calls';

const moto = await startMotoServer();
try {
  const results = await measureCalls(moto.endpoint);
  const rows = results.map((r) => ({
    scenario: r.scenario,
    'ELBv2+EC2': r.cloud,
    budget: anchors[r.scenario].goal,
    within: r.cloud <= anchors[r.scenario].goal ? 'yes' : 'NO',
    'tagging API': r.tagging,
    'state ops': r.state,
    calls: Object.entries(r.byOperation)
      .map(([op, n]) => `${op.split('.')[1]}×${n}`)
      .join(' '),
  }));
  console.table(rows);
  console.log(JSON.stringify(Object.fromEntries(results.map((r) => [r.scenario, r.cloud]))));
  if (rows.some((row) => row.within !== 'yes')) process.exitCode = 1;
} finally {
  await moto.stop();
}
