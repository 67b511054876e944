import { describe, expect, it } from 'vitest';
import {
  evaluateCase,
  negativeCases,
  PolicyEvaluator,
  positiveControls,
} from '../support/iam/evaluation';
import { synthesise } from '../support/iam/policy';

/**
 * What the stack's policies must refuse, shaped as the recorded calls are (the same request
 * context builder, over a fixed view of AWS): mutations of resources without our cluster's
 * ownership tag, changes to the ownership tags, creation without them, and actions the code never
 * calls. bench/results/iam.md lists them with their decisions.
 */
describe('requests the functions and forwarder roles are denied', async () => {
  const evaluator = new PolicyEvaluator(synthesise());
  const cases = await negativeCases();

  it.each(cases.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const result = await evaluateCase(evaluator, c);
    expect(result.decision, result.deciding).not.toBe('Allowed');
  });

  // The control group: the same shapes on our own resources are allowed.
  it.each((await positiveControls()).map((c) => [c.name, c] as const))(
    'but allowed: %s',
    async (_name, c) => {
      const result = await evaluateCase(evaluator, c);
      expect(result.decision, result.deciding).toBe('Allowed');
    },
  );
});
