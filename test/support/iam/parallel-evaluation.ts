import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { Principal } from './evaluation';
import type { Deployment, Evaluation, Synthesised } from './policy';
import type { Authorization } from './request-context';

export interface EvaluationRequest {
  readonly principal: Principal;
  readonly authorization: Authorization;
  readonly deployment: Deployment;
}

/**
 * Evaluates requests on one thread per core, each with its own simulator: a full run records
 * some 16,000 authorizations, about 30 s of evaluation on one thread, which the `iam` project runs
 * after every other project, while the machine's other cores would idle. The same request is
 * evaluated once. The evaluations come back in the order of the requests.
 */
export async function evaluateAll(
  synthesised: Synthesised,
  requests: readonly EvaluationRequest[],
  threads = availableParallelism(),
): Promise<Evaluation[]> {
  const keyOf = (r: EvaluationRequest) =>
    JSON.stringify([r.principal, r.authorization, r.deployment]);
  const keys = requests.map(keyOf);
  const distinct = new Map<string, EvaluationRequest>();
  requests.forEach((request, i) => distinct.set(keys[i]!, request));
  const unique = [...distinct.keys()];
  const count = Math.max(1, Math.min(threads, unique.length));
  const shares = Array.from({ length: count }, (_, t) =>
    unique.filter((_key, i) => i % count === t),
  );
  const answers = await Promise.all(
    shares.map((share) =>
      runThread(
        synthesised,
        share.map((key) => distinct.get(key)!),
      ),
    ),
  );
  const evaluations = new Map<string, Evaluation>();
  shares.forEach((share, t) => share.forEach((key, i) => evaluations.set(key, answers[t]![i]!)));
  return keys.map((key) => evaluations.get(key)!);
}

function runThread(
  synthesised: Synthesised,
  requests: readonly EvaluationRequest[],
): Promise<Evaluation[]> {
  // The thread loads the TypeScript sources through tsx, as the CLI does from a checkout.
  const worker = new Worker(new URL('./evaluation-worker.ts', import.meta.url), {
    execArgv: ['--import', 'tsx'],
    workerData: { synthesised, requests },
  });
  return new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => {
      if (code !== 0) reject(new Error(`an evaluation thread exited with ${code}`));
    });
  });
}
