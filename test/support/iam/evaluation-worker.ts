import { parentPort, workerData } from 'node:worker_threads';
import { PolicyEvaluator } from './evaluation';
import type { EvaluationRequest } from './parallel-evaluation';
import type { Evaluation, Synthesised } from './policy';

/** A thread of parallel-evaluation.ts: evaluates its share of the requests, in order. */
const { synthesised, requests } = workerData as {
  synthesised: Synthesised;
  requests: readonly EvaluationRequest[];
};
const evaluator = new PolicyEvaluator(synthesised);
const evaluations: Evaluation[] = [];
for (const { principal, authorization, deployment } of requests) {
  evaluations.push(await evaluator.evaluate(principal, authorization, deployment));
}
parentPort?.postMessage(evaluations);
