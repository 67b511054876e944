import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * One scenario's result. `leaked`: AWS resources left over (after a delete) or created twice;
 * `lost`: work that never took effect (a change not applied, a Service not synced, an event never
 * delivered or delivered twice).
 */
export interface ScenarioResult {
  readonly scenario: (typeof scenarioNames)[number];
  readonly runs: number;
  readonly converged: number;
  readonly leaked: number;
  readonly lost: number;
  /** How the scenario was run and judged, one line. */
  readonly how: string;
}

/** Every scenario the suite records; a run that lacks one (a filter, one file) keeps the table. */
export const scenarioNames = [
  'crash at every step: create',
  'crash at every step: update',
  'crash at every step: delete',
  'crash at every step: create with pods',
  'crash at every step: pods rolling update',
  'crash at every step: pods rolling update, then a new pod goes',
  'throttling storm',
  'lifecycle events during an EventBridge outage',
  'bad input catalogue',
  'duplicates and races',
  'Kubernetes API outage during syncs',
  'Kubernetes API outage while forwarding',
  'adversarial: spoofed lifecycle events and message floods',
  'adversarial: oversized Services at the forwarder',
  'adversarial: work before limits',
  'adversarial: prototype keys in annotations',
  'adversarial: reserved tag keys',
  'adversarial: foreign resources in state',
  'adversarial: one namespace floods the queue',
  'adversarial: tenant policy violations',
  'adversarial: oversized node selectors',
  'adversarial: tenant policy bypasses',
  'adversarial: foreign security groups',
  'AWS faults: security groups not visible yet',
  'AWS faults: target groups, load balancers and listeners not visible yet',
  'AWS faults: answers lost after the change was made',
  'AWS faults: repeated creates answered as AWS does',
  'killed at every AWS call, restarted: create',
  'killed at every AWS call, restarted: update',
  'killed at every AWS call, restarted: delete',
  'killed at every AWS call, restarted: pods rolling update',
  'half-done host updates and takeovers',
  'adversarial: huge Services in one namespace',
  'adversarial: one namespace hogs the registration budget',
] as const;

const fragments = join('bench', 'results', '.reliability');
export const summaryPath = join('bench', 'results', 'reliability.md');

/**
 * Records a scenario as failed before it runs, so a test that throws half-way shows in the table
 * as lost work instead of leaving an older, passing row (or none) behind. The real result
 * replaces it at the end.
 */
export function recordPending(scenario: ScenarioResult['scenario'], runs: number, how: string) {
  recordScenario({
    scenario,
    runs,
    converged: 0,
    leaked: 0,
    lost: runs,
    how: `${how} (did not finish)`,
  });
}

/** Each test file records its scenarios; the run's teardown gathers them into one table. */
export function recordScenario(result: ScenarioResult): void {
  mkdirSync(fragments, { recursive: true });
  const file = result.scenario.replace(/[^a-z0-9]+/gi, '-').toLowerCase();
  writeFileSync(join(fragments, `${file}.json`), JSON.stringify(result));
}

export function clearScenarios(): void {
  rmSync(fragments, { recursive: true, force: true });
}

export function scenarioTable(): { results: ScenarioResult[]; markdown: string } {
  const names = existsSync(fragments)
    ? readdirSync(fragments).filter((n) => n.endsWith('.json'))
    : [];
  const results = names
    .map((n) => JSON.parse(readFileSync(join(fragments, n), 'utf8')) as ScenarioResult)
    .sort((a, b) => a.scenario.localeCompare(b.scenario));
  const rows = results.map(
    (r) => `| ${r.scenario} | ${r.runs} | ${r.converged} | ${r.leaked} | ${r.lost} | ${r.how} |`,
  );
  const total = results.reduce(
    (sum, r) => ({
      runs: sum.runs + r.runs,
      converged: sum.converged + r.converged,
      leaked: sum.leaked + r.leaked,
      lost: sum.lost + r.lost,
    }),
    { runs: 0, converged: 0, leaked: 0, lost: 0 },
  );
  const markdown = [
    '# Reliability suite',
    '',
    'Written by `npm run test:reliability` (also part of `npm test`): each scenario drives the real',
    'use cases or the whole runtime against moto and the fake Kubernetes API server, breaks',
    'something, and checks the end state. `leaked`: AWS resources left over or created twice;',
    '`lost`: changes, messages or events that never took effect (or took effect twice).',
    '',
    '| scenario | runs | converged | leaked | lost | how |',
    '| --- | --- | --- | --- | --- | --- |',
    ...rows,
    `| **all** | ${total.runs} | ${total.converged} | ${total.leaked} | ${total.lost} | |`,
    '',
  ].join('\n');
  return { results, markdown };
}
