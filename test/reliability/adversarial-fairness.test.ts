/**
 * Adversarial catalogue (issue 19, finding 7): one namespace floods the work queue. Two halves:
 * the whole runtime against moto and the fake API server, where a flood of work for one namespace
 * must create nothing and cost a Service in another namespace nothing but time; and the
 * propagation simulation (virtual clock, bench/sim), which models what moto does not: SQS fair
 * queues delivering the quiet namespace's message first.
 */
import { afterEach, expect, it } from 'vitest';
import { SqsWorkQueue } from '../../functions/queue/sqs-work-queue';
import type { WorkMessage } from '../../functions/contract/work-messages';
import { simulateNamespaceBurst } from '../../bench/scenarios/propagation-bursts';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { recordPending, recordScenario } from './support/summary';
import { createLoadBalancerServices, drainAll, endStateProblems } from './support/world';

let world: RuntimeWorld | undefined;

afterEach(async () => {
  await world?.stop();
  world = undefined;
});

const scenario = 'adversarial: one namespace floods the queue';
const floodSize = 90;
/** With fair queues the quiet Service waits for a consumer, not for the burst. */
const quietBudgetMs = 30_000;
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

it('one namespace floods the queue: nothing is created for the flood, a Service in another namespace converges, and with fair queues it is not delayed behind the burst', async () => {
  recordPending(
    scenario,
    3,
    `${floodSize} flood messages for one namespace beside a good Service in another, and the fair-queue simulation`,
  );
  world = await createRuntimeWorld({ backoffBaseSeconds: 1, backoffMaxSeconds: 4 });

  // The flood: full syncs, resyncs and host updates for Services that do not exist, sent the way
  // the functions and the forwarder send (SqsWorkQueue: MessageGroupId "flood"), ahead of the
  // good Service's one message.
  const kinds = ['service', 'resync', 'hosts'] as const;
  const flood: WorkMessage[] = Array.from({ length: floodSize }, (_, i) => ({
    v: 1,
    kind: kinds[i % kinds.length]!,
    key: `flood/ghost-${i}`,
  }));
  await new SqsWorkQueue(world.sqs, world.config.queueUrl).send(flood);
  await createLoadBalancerServices(world, ['good']);
  const drained = await drainAll(world);

  const problems: string[] = [];
  let converged = 0;
  // Safe outcome for the flood: nothing in AWS (checked with the end state below), no state left
  // behind, nothing parked in the DLQ, no error.
  const leftState: string[] = [];
  for (const { key } of flood as Extract<WorkMessage, { key: string }>[]) {
    if ((await world.runtime.store.getService(key)) !== undefined) leftState.push(key);
  }
  const parked = await world.deadLetters();
  const errors = world.log.lines.filter((l) => l.level === 'error');
  if (leftState.length > 0) problems.push(`state left for ${leftState.length} flood keys`);
  if (parked.length > 0) problems.push(`${parked.length} messages in the DLQ`);
  if (errors.length > 0) problems.push(`errors logged: ${errors.map((e) => e.message).join('; ')}`);
  const end = await endStateProblems(world, { good: [80, 443] });
  problems.push(...end.problems);
  if (
    drained &&
    leftState.length === 0 &&
    parked.length === 0 &&
    errors.length === 0 &&
    end.leaked === 0
  ) {
    converged++;
  }
  converged += end.converged;

  // What moto cannot show: the queue's delivery order with fair queues, on the simulation.
  const fair = await simulateNamespaceBurst({ fair: true });
  const unfair = await simulateNamespaceBurst({ fair: false });
  const simulated =
    fair.burstConverged === fair.burstServices &&
    unfair.burstConverged === unfair.burstServices &&
    fair.quietMs < quietBudgetMs &&
    fair.quietMs < unfair.quietMs;
  if (simulated) converged++;
  else {
    problems.push(
      `simulation: quiet ${seconds(fair.quietMs)} fair / ${seconds(unfair.quietMs)} unfair, burst ${fair.burstConverged}/${fair.burstServices}`,
    );
  }

  recordScenario({
    scenario,
    runs: 3,
    converged,
    leaked: end.leaked,
    lost: 3 - converged,
    how: `moto + fake API server: ${floodSize} service/resync/hosts messages for non-existent Services in namespace flood (MessageGroupId "flood") ahead of 1 good Service in default — nothing created, no state, DLQ or error left, the good Service converged (moto keeps groups but does not reorder); simulation (virtual clock, bench/sim fair-queue model, 5 consumers): 1 Service in namespace quiet behind a ${fair.burstServices}-Service burst updated ${seconds(fair.quietMs)} after its change with fair queues, ${seconds(unfair.quietMs)} without; all ${fair.burstServices} burst Services converged either way (last at ${seconds(fair.burstMaxMs)})`,
  });
  expect(drained).toBe(true);
  expect(problems).toEqual([]);
  expect(converged).toBe(3);
});
