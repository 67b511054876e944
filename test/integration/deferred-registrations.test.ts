import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DescribeTargetHealthCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
import {
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultRegistrationBudget } from '../../functions/aws/registration-budget';
import { slotRule } from '../../functions/core/registration-slots';
import { readNlbState } from '../../functions/nlb/nlb-state';
import {
  changeBudgetPk,
  registrationBudgetPk,
  serviceLeasePk,
} from '../../functions/state/table-layout';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';

/**
 * Issue 37: a sync whose registration slots are further off than the 250 ms a Lambda may sleep
 * for them keeps them (booked, on its lease item) and ends its pass with its progress recorded;
 * the key's message comes back when they are due, and that pass registers on them without
 * booking again. Real runtime, moto (ELBv2, EC2, DynamoDB, SQS) and the fake API server; the
 * budget item is set as another instance's bookings would leave it.
 */
describe('registrations deferred to their slot (issue 37)', () => {
  let world: RuntimeWorld | undefined;
  afterEach(async () => {
    await world?.stop();
    world = undefined;
  });

  const rule = slotRule(defaultRegistrationBudget, 'register');
  const key = 'default/web';

  /** The budget booked by others so that the next slot is `inMs` from now. */
  async function bookedAhead(w: RuntimeWorld, inMs: number): Promise<number> {
    const tat = Date.now() + rule.toleranceMs + inMs;
    await doc(w).send(
      new PutCommand({ TableName: 'state', Item: { pk: registrationBudgetPk, tat } }),
    );
    return tat;
  }

  function doc(w: RuntimeWorld) {
    return DynamoDBDocumentClient.from(w.account.client(DynamoDBClient));
  }

  async function item(w: RuntimeWorld, pk: string) {
    return (await doc(w).send(new GetCommand({ TableName: 'state', Key: { pk } }))).Item;
  }

  function calls(w: RuntimeWorld, operation: string): number {
    return w.aws.recorder.attempts.filter((a) => a.operation === operation).length;
  }

  async function registered(w: RuntimeWorld): Promise<Set<string>[]> {
    const state = readNlbState((await w.runtime.store.getService(key))?.provider);
    return Promise.all(
      Object.values(state.targetGroups ?? {}).map(async (tg) => {
        const health = await w.aws.testClients.elbv2.send(
          new DescribeTargetHealthCommand({ TargetGroupArn: tg.arn }),
        );
        return new Set((health.TargetHealthDescriptions ?? []).map((d) => d.Target?.Id ?? ''));
      }),
    );
  }

  it('a host update keeps its slots on its lease item, comes back for them, and registers without booking again', async () => {
    world = await createRuntimeWorld();
    const w = world;
    await w.createService('web');
    const tatBefore = await bookedAhead(w, 2_500);
    const registersBefore = calls(w, 'RegisterTargets');
    const tagsBefore = calls(w, 'DescribeTags');
    const added = await w.addNode();
    await w.sendToNodeQueue({ v: 1, kind: 'node', reason: 'node added' });
    // Node sync runs the host update itself: it books both target groups' slots at once, finds
    // them 2.5 s off, and hands the key to the work queue, delayed.
    await w.handleNodesOnce(1);

    const lease = await item(w, serviceLeasePk(key));
    expect(lease?.keptSlots).toHaveLength(2);
    const slots = (lease?.keptSlots as { lane: string; atMs: number }[]).map((s) => s.atMs);
    expect(slots[1]! - slots[0]!).toBe(rule.intervalMs);
    expect(Number((await item(w, registrationBudgetPk))?.tat)).toBe(
      tatBefore + 2 * rule.intervalMs,
    );
    // Nothing was asked of ELBv2 before the slots: not even the ownership check.
    expect(calls(w, 'RegisterTargets')).toBe(registersBefore);
    expect(calls(w, 'DescribeTags')).toBe(tagsBefore);
    expect(w.metrics.get('Retries')).toBe(0);
    const requeued = w.log.lines.filter((l) => l.message === 'sync requeued');
    expect(requeued).toHaveLength(1);
    // Back when the first slot is within 250 ms: SQS delays are whole seconds.
    const comesBack = Number(requeued[0]?.fields.seconds);
    expect(comesBack).toBeGreaterThanOrEqual(1);
    expect(comesBack).toBeLessThanOrEqual(Math.ceil((2_500 - 250) / 1000));
    expect((await registered(w)).every((ids) => !ids.has(added.instanceId))).toBe(true);

    // The message comes back when the slots are due; its pass uses them.
    await w.drain(4);
    expect((await registered(w)).every((ids) => ids.has(added.instanceId))).toBe(true);
    expect(calls(w, 'RegisterTargets')).toBe(registersBefore + 2);
    // No further booking: the budget item is as the deferred pass left it.
    expect(Number((await item(w, registrationBudgetPk))?.tat)).toBe(
      tatBefore + 2 * rule.intervalMs,
    );
    expect((await item(w, serviceLeasePk(key)))?.keptSlots).toBeUndefined();
    expect(w.metrics.get('Retries')).toBe(0);
  });

  it('a create whose registrations must wait keeps what it created: the next pass registers on the kept slots and creates nothing again', async () => {
    world = await createRuntimeWorld();
    const w = world;
    await w.addNode();
    await bookedAhead(w, 2_500);
    await w.api.createNamespacedService({ namespace: 'default', body: loadBalancerService('web') });
    await w.send({ v: 1, kind: 'service', key });
    await w.handleOnce(1);

    // Progress: the security group and both target groups (targets go in before the NLB is
    // made) are recorded, and both registrations' slots kept; no target, no NLB, no status yet.
    const state = readNlbState((await w.runtime.store.getService(key))?.provider);
    expect(state.securityGroupId).toBeDefined();
    expect(Object.keys(state.targetGroups ?? {})).toHaveLength(2);
    expect(calls(w, 'CreateTargetGroup')).toBe(2);
    expect(calls(w, 'RegisterTargets')).toBe(0);
    // (Beside them, the change slots the NLB and its listeners did not reach this pass.)
    const kept = (await item(w, serviceLeasePk(key)))?.keptSlots as { lane: string }[];
    expect(kept.filter((slot) => slot.lane === 'register')).toHaveLength(2);
    const live = await w.api.readNamespacedService({ namespace: 'default', name: 'web' });
    expect(live.status?.loadBalancer?.ingress ?? []).toHaveLength(0);

    await w.drain(4);
    expect(calls(w, 'CreateSecurityGroup')).toBe(1);
    expect(calls(w, 'CreateTargetGroup')).toBe(2);
    expect(calls(w, 'RegisterTargets')).toBe(2);
    expect(calls(w, 'CreateLoadBalancer')).toBe(1);
    const done = readNlbState((await w.runtime.store.getService(key))?.provider);
    const after = await w.api.readNamespacedService({ namespace: 'default', name: 'web' });
    expect(after.status?.loadBalancer?.ingress?.[0]?.hostname).toBe(done.dnsName);
    expect((await item(w, serviceLeasePk(key)))?.keptSlots).toBeUndefined();
    expect(w.metrics.get('Retries')).toBe(0);
    const events = await w.api.listNamespacedEvent({ namespace: 'default' });
    expect(events.items.map((e) => e.reason)).not.toContain('SyncLoadBalancerFailed');
  });
  it('a create whose ELBv2 changes must wait books them at once before any call, keeps them on its lease item, and makes them in one later pass', async () => {
    // The change budget as by default (`defaultChangeBudget`), said here for the slot arithmetic.
    world = await createRuntimeWorld({ changeBudget: { perSecond: 3, burst: 10 } });
    const w = world;
    await w.addNode();
    const change = slotRule({ perSecond: 3, burst: 10 }, 'change');
    // Other instances booked the change budget 2.5 s ahead.
    const tatBefore = Date.now() + change.toleranceMs + 2_500;
    await doc(w).send(
      new PutCommand({ TableName: 'state', Item: { pk: changeBudgetPk, tat: tatBefore } }),
    );
    await w.api.createNamespacedService({ namespace: 'default', body: loadBalancerService('web') });
    await w.send({ v: 1, kind: 'service', key });
    await w.handleOnce(1);

    // Nothing was asked of AWS before the slots: no subnet lookup, no security group (EC2's
    // buckets), no ELBv2 change; the record is as it was.
    for (const op of [
      'DescribeSubnets',
      'CreateSecurityGroup',
      'CreateTargetGroup',
      'CreateLoadBalancer',
      'CreateListener',
    ])
      expect(calls(w, op)).toBe(0);
    const state = readNlbState((await w.runtime.store.getService(key))?.provider);
    expect(state.securityGroupId).toBeUndefined();
    // Two target groups, the NLB and two listeners: five slots, booked in one write and kept.
    const kept = (await item(w, serviceLeasePk(key)))?.keptSlots as { lane: string }[];
    expect(kept.filter((slot) => slot.lane === 'change')).toHaveLength(5);
    const booked = Number((await item(w, changeBudgetPk))?.tat);
    expect(booked).toBeGreaterThanOrEqual(tatBefore + 5 * change.intervalMs);
    expect(booked).toBeLessThan(tatBefore + 6 * change.intervalMs);

    await w.drain(4);
    expect(calls(w, 'CreateSecurityGroup')).toBe(1);
    expect(calls(w, 'CreateTargetGroup')).toBe(2);
    expect(calls(w, 'CreateLoadBalancer')).toBe(1);
    expect(calls(w, 'CreateListener')).toBe(2);
    // The pass that made them booked nothing more.
    expect(Number((await item(w, changeBudgetPk))?.tat)).toBe(booked);
    const after = await w.api.readNamespacedService({ namespace: 'default', name: 'web' });
    expect(after.status?.loadBalancer?.ingress?.[0]?.hostname).toBeDefined();
    expect((await item(w, serviceLeasePk(key)))?.keptSlots).toBeUndefined();
    expect(w.metrics.get('Retries')).toBe(0);
  });

  it('a delete sent back for its change slots after the NLB went resumes there: the NLB is not deleted twice', async () => {
    world = await createRuntimeWorld({ changeBudget: { perSecond: 3, burst: 10 } });
    const w = world;
    await w.addNode();
    await w.createService('web');
    const change = slotRule({ perSecond: 3, burst: 10 }, 'change');
    // The key comes back with one change slot due (a pass before it booked it), and other
    // instances have booked the budget 5 s ahead: its first call goes, the next must wait.
    await doc(w).send(
      new UpdateCommand({
        TableName: 'state',
        Key: { pk: serviceLeasePk(key) },
        UpdateExpression: 'SET keptSlots = :kept',
        ExpressionAttributeValues: { ':kept': [{ lane: 'change', atMs: Date.now() }] },
      }),
    );
    await doc(w).send(
      new PutCommand({
        TableName: 'state',
        Item: { pk: changeBudgetPk, tat: Date.now() + change.toleranceMs + 5_000 },
      }),
    );
    await w.api.deleteNamespacedService({ namespace: 'default', name: 'web' });
    await w.send({ v: 1, kind: 'service', key });
    await w.handleOnce(1);

    expect(calls(w, 'DeleteLoadBalancer')).toBe(1);
    expect(calls(w, 'DeleteTargetGroup')).toBe(0);
    // The record no longer names the NLB: the pass that comes back starts at the target groups.
    const state = readNlbState((await w.runtime.store.getService(key))?.provider);
    expect(state.loadBalancerArn).toBeUndefined();
    expect(state.deletedLoadBalancerArn).toBeDefined();
    expect(Object.keys(state.targetGroups ?? {})).toHaveLength(2);
    const kept = (await item(w, serviceLeasePk(key)))?.keptSlots as { lane: string }[];
    expect(kept.filter((slot) => slot.lane === 'change')).toHaveLength(2);

    await w.drain(7);
    expect(calls(w, 'DeleteLoadBalancer')).toBe(1);
    expect(calls(w, 'DeleteTargetGroup')).toBe(2);
    await expect(
      w.api.readNamespacedService({ namespace: 'default', name: 'web' }),
    ).rejects.toThrow();
  });
});
