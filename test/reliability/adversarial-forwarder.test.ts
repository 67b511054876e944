import { expect, inject, it } from 'vitest';
import {
  forwarderMemoryLimitMiB,
  oversizedForwarderRun,
  quietNamespace,
} from '../../bench/scenarios/forwarder-oversized';
import { recordPending, recordScenario } from './support/summary';

const scenario = 'adversarial: oversized Services at the forwarder';
/** The issue's numbers: 20 to 40 such Services were enough to push the forwarder past its limit. */
const options = { listed: 30, watched: 5, ranges: 85_000 };

it('oversized Services at the forwarder: one tenant’s 85,000-range Services keep the forwarder under its memory limit, and another namespace’s Services are still forwarded', async () => {
  const runs = options.listed + options.watched + 2;
  const how = `${options.listed} Services with ${options.ranges.toLocaleString('en-US')} source ranges each (~1.5 MB) in one namespace at the initial list and ${options.watched} more through the watch, beside a Service in another namespace at each; the forwarder bundle as in a Pod`;
  recordPending(scenario, runs, how);

  const run = await oversizedForwarderRun(inject('awsEndpoint'), options);

  const underLimit = run.crashed === undefined && run.peakRssMiB < forwarderMemoryLimitMiB;
  const arrived = run.expected.filter((key) => run.delivered.includes(key));
  recordScenario({
    scenario,
    runs,
    converged: underLimit ? arrived.length : 0,
    // The forwarder creates nothing in AWS: it only sends keys; the functions then refuse the
    // oversized Services with a Warning ('adversarial: work before limits').
    leaked: 0,
    lost: runs - (underLimit ? arrived.length : 0),
    how: `${how}: peak RSS ${run.peakRssMiB} MiB (limit ${forwarderMemoryLimitMiB} Mi), ${run.crashed === undefined ? 'no restart' : 'crashed'}, ${arrived.length} of ${run.expected.length} keys on the queue, ${quietNamespace}'s ${arrived.filter((k) => k.startsWith(`${quietNamespace}/`)).length === 2 ? 'both' : 'not both'} among them`,
  });
  expect(run.crashed).toBeUndefined();
  expect(run.peakRssMiB).toBeLessThan(forwarderMemoryLimitMiB);
  expect(run.delivered).toEqual(expect.arrayContaining([...run.expected]));
  expect(run.delivered).toContain(`${quietNamespace}/listed`);
  expect(run.delivered).toContain(`${quietNamespace}/watched`);
}, 240_000);
