import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runSweep } from '../../functions/runtime/sweep';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';

/**
 * Issue 19: whoever can send to the work queue (on self-managed clusters often any Pod, through
 * the node role) must not be able to make the functions spend much. A forged `resync` costs a
 * checkpoint hit, a flood of `node` messages one Node list per interval.
 */
const key = 'default/web';
let world: RuntimeWorld;

beforeEach(async () => {
  world = await createRuntimeWorld({ nodeSyncMinIntervalSeconds: 10 });
});

afterEach(async () => {
  await world.stop();
});

const awsReads = () =>
  Object.entries(world.aws.recorder.byOperation())
    .filter(([op]) => /^(ElasticLoadBalancingV2|EC2)\./.test(op))
    .reduce((sum, [, count]) => sum + count, 0);

const nodeLists = () =>
  world.kube.requests.filter((r) => r.method === 'GET' && r.path === '/api/v1/nodes').length;

describe('forged work messages cost little', () => {
  it('a resync the sweep did not send (no pass, or a made-up one) is an ordinary sync: no AWS call', async () => {
    await world.createService();
    world.aws.recorder.reset();
    await world.send({ v: 1, kind: 'resync', key });
    await world.drain();
    await world.send({ v: 1, kind: 'resync', key, pass: randomUUID() });
    await world.drain();
    expect(awsReads()).toBe(0);
    expect(world.metrics.get('UnverifiedResyncs')).toBe(2);
    expect(world.metrics.get('Syncs{outcome=done,kind=service}')).toBeGreaterThanOrEqual(3);
    expect(world.metrics.get('Syncs{outcome=done,kind=resync}')).toBe(0);
  });

  it("the sweep's own resync still checks AWS (drift repair), and a copy of it after two more sweeps does not", async () => {
    await world.createService();
    world.aws.recorder.reset();
    await runSweep(world.runtime);
    const [sent] = await world.receive(1);
    expect(sent).toBeDefined();
    await world.handle(sent ? [sent] : []);
    expect(world.metrics.get('Syncs{outcome=done,kind=resync}')).toBe(1);
    expect(awsReads()).toBeGreaterThan(0);
    // A sender that copied the message replays it once the sweep has moved on twice.
    await runSweep(world.runtime);
    await runSweep(world.runtime);
    await world.drain();
    world.aws.recorder.reset();
    await world.send(sent?.body ?? '');
    await world.drain();
    expect(awsReads()).toBe(0);
    expect(world.metrics.get('UnverifiedResyncs')).toBeGreaterThanOrEqual(1);
  });

  it('a flood of node messages right after a pass is folded into one later pass', async () => {
    // An interval the flood's handling does not outlast on a loaded machine (moto answers slowly
    // when every core runs other tests, and a flood handled over two intervals rightly earns two
    // passes); the longest whose quiet period a receive can wait out (20 s).
    await world.stop();
    world = await createRuntimeWorld({ nodeSyncMinIntervalSeconds: 18 });
    await world.createService();
    await world.send({ v: 1, kind: 'node', reason: 'first' });
    await world.drain();
    const before = nodeLists();
    await Promise.all(
      Array.from({ length: 50 }, () => world.send({ v: 1, kind: 'node', reason: 'flood' })),
    );
    // Long enough for the delayed message that carries the flood to the next interval.
    await world.drain(world.config.nodeSyncMinIntervalSeconds + 2);
    // One pass for the whole flood, after the interval; none for each message.
    expect(nodeLists() - before).toBe(1);
    expect(world.metrics.get('CoalescedNodeMessages')).toBeGreaterThanOrEqual(50);
    // Waits out two quiet periods of interval + 2 s by design (the flood's delayed pass comes
    // between them).
  }, 120_000);
});
