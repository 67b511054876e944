import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DescribeTargetHealthCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
import {
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
} from '@aws-sdk/lib-dynamodb';
import type { FinalizeHandler, FinalizeHandlerArguments, MetadataBearer } from '@smithy/types';
import { afterEach, describe, expect, it } from 'vitest';
import { serviceLeasePk } from '../../functions/state/table-layout';
import { readNlbState } from '../../functions/nlb/nlb-state';
import { TatBudgetStore } from '../../functions/aws/registration-budget';
import { DynamoTatItem } from '../../functions/state/registration-budget-item';
import { registrationBudgetPk } from '../../functions/state/table-layout';
import {
  applyBudgetWrite,
  budgetWrite,
  fingerprintAttribute,
  latestBookableTat,
  latestLaneHorizon,
  namespaceFingerprint,
  namespaceLanes,
  namespaceTicketAttribute,
  slotRule,
  type BudgetItemAttributes,
} from '../../functions/core/registration-slots';
import { loadBalancerService } from '../support/kube-objects';
import { MotoAccount } from '../../kit/moto';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';

const spec = { perSecond: 4, burst: 10 };

/** The state table as the stack makes it: a string partition key `pk`, on demand. */
async function createStateTable(client: DynamoDBClient): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: 'state',
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    }),
  );
}

/**
 * DynamoDB applies each conditional write atomically; moto's threaded server does not, so the two
 * clients' requests go to moto one at a time (in whatever order the two instances send them).
 * What is tested is our conditions and slot arithmetic across instances, not moto's locking.
 */
function serialized(clients: DynamoDBClient[]): void {
  let last: Promise<unknown> = Promise.resolve();
  for (const client of clients) {
    client.middlewareStack.add(
      (next: FinalizeHandler<object, MetadataBearer>) =>
        (args: FinalizeHandlerArguments<object>) => {
          const run = last.then(
            () => next(args),
            () => next(args),
          );
          last = run.catch(() => undefined);
          return run;
        },
      { step: 'finalizeRequest', name: 'oneAtATime' },
    );
  }
}

describe('the registration budget on the state table (moto DynamoDB)', () => {
  it('two instances booking at once never exceed rate + burst together, and past the horizon the rest come back later', async () => {
    const account = new MotoAccount();
    const clients = [account.client(DynamoDBClient), account.client(DynamoDBClient)];
    serialized(clients);
    await createStateTable(clients[0]!);
    const t0 = Date.now();
    const rule = slotRule(spec, 'register');
    const stores = clients.map(
      (client) =>
        new TatBudgetStore(new DynamoTatItem(DynamoDBDocumentClient.from(client), 'state')),
    );
    // 25 registrations per instance, all in flight at once: exactly what the burst and the 10 s
    // horizon hold at 4/s (time stands still meanwhile, so all compete for the same horizon).
    const bookings = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => ({
        instance: i % 2,
        booking: await stores[i % 2]!.book(t0, rule),
      })),
    );
    const slots = bookings.flatMap(({ booking }) =>
      booking.kind === 'slot' ? [booking.atMs] : [],
    );
    expect(slots).toHaveLength(spec.burst + spec.perSecond * 10);
    for (const from of slots) {
      for (const seconds of [0, 1, 2.5, 10]) {
        const inWindow = slots.filter((at) => at >= from && at <= from + seconds * 1000).length;
        expect(inWindow).toBeLessThanOrEqual(spec.burst + spec.perSecond * seconds);
      }
    }
    expect(Math.max(...slots) - t0).toBeLessThanOrEqual(rule.horizonMs);
    // One more, from the second instance: past the horizon, so nothing is booked.
    expect(await stores[1]!.book(t0, rule)).toEqual({ kind: 'later', inMs: rule.intervalMs });
    const item = await DynamoDBDocumentClient.from(clients[0]!).send(
      new GetCommand({ TableName: 'state', Key: { pk: registrationBudgetPk } }),
    );
    expect(item.Item?.tat).toBe(latestBookableTat(t0, rule) + rule.intervalMs);
    expect(slots.filter((at) => at === t0)).toHaveLength(spec.burst);
  });
});

describe('the registration budget shared fairly between namespaces (moto DynamoDB)', () => {
  it('a namespace that books a burst holds at most its share ahead; another namespace, on another instance, books right behind it, in one write', async () => {
    const account = new MotoAccount();
    const clients = [account.client(DynamoDBClient), account.client(DynamoDBClient)];
    serialized(clients);
    await createStateTable(clients[0]!);
    const doc = DynamoDBDocumentClient.from(clients[0]!);
    let writes = 0;
    clients[1]!.middlewareStack.add(
      (next: FinalizeHandler<object, MetadataBearer>) =>
        (args: FinalizeHandlerArguments<object>) => {
          writes++;
          return next(args);
        },
      { step: 'finalizeRequest', name: 'countWrites' },
    );
    const t0 = Date.now();
    const rule = slotRule(spec, 'register');
    const [hogStore, quietStore] = clients.map(
      (client) =>
        new TatBudgetStore(new DynamoTatItem(DynamoDBDocumentClient.from(client), 'state')),
    );
    const hog = 'tenant-a';
    const hogLanes = namespaceLanes(hog);
    const quiet = Array.from({ length: 50 }, (_, i) => `quiet-${i}`).find((ns) =>
      namespaceLanes(ns).every((lane) => !hogLanes.includes(lane)),
    )!;
    // The hog's workers all ask at once (time stands still): first come, first served, they would
    // book the whole 10 s horizon.
    const hogBookings = await Promise.all(
      Array.from({ length: 50 }, () => hogStore!.book(t0, rule, hog)),
    );
    const hogSlots = hogBookings.flatMap((b) => (b.kind === 'slot' ? [b.atMs - t0] : []));
    expect(hogSlots.filter((at) => at === 0)).toHaveLength(spec.burst);
    expect(Math.max(...hogSlots)).toBe(rule.shareMs + rule.intervalMs);
    expect(hogBookings.filter((b) => b.kind === 'behind')).toHaveLength(
      50 - spec.burst - rule.shareMs / rule.intervalMs - 1,
    );
    // Another instance, another namespace: its slot is the next one, 1.5 s ahead, not 10 s.
    // A first (refused) write tells this instance where the item is, as a warm instance knows.
    await quietStore!.book(t0 - 60_000, rule, quiet);
    writes = 0;
    expect(await quietStore!.book(t0, rule, quiet)).toMatchObject({
      kind: 'slot',
      atMs: t0 + rule.shareMs + 2 * rule.intervalMs,
    });
    expect(writes).toBe(1);
    // The hog's next slot comes after it.
    expect(await hogStore!.book(t0 + rule.intervalMs, rule, hog)).toMatchObject({
      kind: 'slot',
      atMs: t0 + rule.shareMs + 3 * rule.intervalMs,
    });
    const item = await doc.send(
      new GetCommand({ TableName: 'state', Key: { pk: registrationBudgetPk } }),
    );
    const attributes = Object.keys(item.Item ?? {}).filter((k) => k !== 'pk' && k !== 'tat');
    // The lanes of both namespaces, who wrote each, and the ticket line of the one held back.
    const lanes = [...hogLanes, ...namespaceLanes(quiet)];
    expect(attributes.sort()).toEqual(
      [...lanes, ...lanes.map(fingerprintAttribute), namespaceTicketAttribute(hog)].sort(),
    );
    // Its callers held back took tickets one call apart, after its share frees (issue 37); all
    // asking in the same instant, up to 8 attempts each, some end up sharing the line's end.
    const held = hogBookings.flatMap((b) => (b.kind === 'behind' ? [b.inMs] : []));
    const turns = [...new Set(held)].sort((a, b) => a - b);
    expect(turns.length).toBeGreaterThanOrEqual(8);
    expect(turns.slice(1).map((t, i) => t - turns[i]!)).toEqual(
      turns.slice(1).map(() => rule.intervalMs),
    );
    expect(item.Item?.[namespaceTicketAttribute(hog)]).toBe(
      t0 + Math.max(...held) + rule.intervalMs,
    );
    expect(item.Item?.[hogLanes[0]]).toBe(item.Item?.tat);
  });
});

describe("the budget item's conditions on DynamoDB are the in-memory rule's (moto)", () => {
  it('a lane the namespace wrote last holds it back past its share, lanes others wrote only past two shares', async () => {
    const account = new MotoAccount();
    const client = account.client(DynamoDBClient);
    await createStateTable(client);
    const doc = DynamoDBDocumentClient.from(client);
    const dynamo = new DynamoTatItem(doc, 'state');
    const rule = slotRule(spec, 'register');
    const ns = 'team-a';
    const [l0, l1] = namespaceLanes(ns);
    const [f0, f1] = [fingerprintAttribute(l0), fingerprintAttribute(l1)];
    const mine = namespaceFingerprint(ns);
    const other = mine === 1 ? 2 : 1;
    const now = 1_000_000;
    const own = latestLaneHorizon(now, rule);
    const foreign = own + rule.shareMs;
    // A backlog: the slot must be waited for, so the lanes decide.
    const tat = now + rule.toleranceMs + 2_000;
    const cases: Record<string, BudgetItemAttributes> = {
      'own lanes past the share': { tat, [l0]: own + 1, [l1]: own + 1, [f0]: mine, [f1]: mine },
      'own lanes within the share': { tat, [l0]: own, [l1]: own, [f0]: mine, [f1]: mine },
      'one own lane past it, the other foreign': {
        tat,
        [l0]: own + 1,
        [f0]: mine,
        [l1]: 0,
        [f1]: other,
      },
      'foreign lanes past one share, within two': {
        tat,
        [l0]: foreign,
        [l1]: foreign,
        [f0]: other,
        [f1]: other,
      },
      'foreign lanes past two shares': {
        tat,
        [l0]: foreign + 1,
        [l1]: foreign + 1,
        [f0]: other,
        [f1]: other,
      },
      'lanes without fingerprints (an older item), past two shares': {
        tat,
        [l0]: foreign + 1,
        [l1]: foreign + 1,
      },
      'one foreign lane within two shares': {
        tat,
        [l0]: foreign + 1,
        [l1]: foreign,
        [f0]: other,
        [f1]: other,
      },
      'no lanes yet': { tat },
    };
    const outcomes: Record<string, boolean> = {};
    for (const [name, values] of Object.entries(cases)) {
      await doc.send(
        new PutCommand({ TableName: 'state', Item: { pk: registrationBudgetPk, ...values } }),
      );
      const write = budgetWrite(tat, now, rule, [l0, l1], 1, mine);
      const stored = await dynamo.write(write);
      const expected = applyBudgetWrite(values, write);
      expect({ name, booked: stored.booked }).toEqual({ name, booked: expected.update.booked });
      if (stored.booked) {
        const item = await doc.send(
          new GetCommand({ TableName: 'state', Key: { pk: registrationBudgetPk } }),
        );
        const { pk: _pk, ...attributes } = item.Item ?? {};
        expect(attributes).toEqual(expected.item);
      }
      outcomes[name] = stored.booked;
    }
    expect(outcomes).toEqual({
      'own lanes past the share': false,
      'own lanes within the share': true,
      'one own lane past it, the other foreign': false,
      'foreign lanes past one share, within two': true,
      'foreign lanes past two shares': false,
      'lanes without fingerprints (an older item), past two shares': false,
      'one foreign lane within two shares': true,
      'no lanes yet': true,
    });
  });
});

describe('a host update against a booked-up budget (runtime, moto, fake API server)', () => {
  let world: RuntimeWorld | undefined;
  afterEach(async () => {
    await world?.stop();
    world = undefined;
  });

  it('ends requeue-after without a failure, a retry or a Warning, and registers once the budget frees', async () => {
    world = await createRuntimeWorld();
    const w = world;
    const key = 'default/web';
    await w.api.createNamespacedService({ namespace: 'default', body: loadBalancerService('web') });
    await w.send({ v: 1, kind: 'service', key });
    await w.drain();

    // Another instance booked the budget an hour ahead.
    const doc = DynamoDBDocumentClient.from(w.account.client(DynamoDBClient));
    await doc.send(
      new PutCommand({
        TableName: 'state',
        Item: { pk: registrationBudgetPk, tat: Date.now() + 3_600_000 },
      }),
    );
    const registersBefore = registerCalls(w);
    const added = await w.addNode();
    await w.send({ v: 1, kind: 'node', reason: 'node added' });
    await w.drain();

    expect(registerCalls(w)).toBe(registersBefore);
    expect(await targetsHave(w, key, added.instanceId)).toBe(false);
    expect(w.metrics.get('Retries')).toBe(0);
    expect(Number((await w.runtime.store.getItem(serviceLeasePk(key)))?.failures ?? 0)).toBe(0);
    const requeued = w.log.lines.filter((l) => l.message === 'sync requeued');
    expect(requeued).toHaveLength(1);
    expect(requeued[0]?.fields.seconds).toBeGreaterThan(3000);
    const events = await w.api.listNamespacedEvent({ namespace: 'default' });
    expect(events.items.map((e) => e.reason)).not.toContain('UpdateLoadBalancerFailed');

    // The budget frees; the key's message is due (made visible here rather than waiting an hour).
    await doc.send(new DeleteCommand({ TableName: 'state', Key: { pk: registrationBudgetPk } }));
    await w.send({ v: 1, kind: 'hosts', key });
    await w.drain();
    expect(await targetsHave(w, key, added.instanceId)).toBe(true);
  });
});

/** RegisterTargets requests that reached ELBv2 (a call the budget refused never does). */
function registerCalls(w: RuntimeWorld): number {
  return w.aws.recorder.attempts.filter((a) => a.operation === 'RegisterTargets').length;
}

async function targetsHave(w: RuntimeWorld, key: string, instanceId: string): Promise<boolean> {
  const state = readNlbState((await w.runtime.store.getService(key))?.provider);
  const groups = Object.values(state.targetGroups ?? {});
  expect(groups.length).toBeGreaterThan(0);
  for (const tg of groups) {
    const health = await w.aws.testClients.elbv2.send(
      new DescribeTargetHealthCommand({ TargetGroupArn: tg.arn }),
    );
    const ids = (health.TargetHealthDescriptions ?? []).map((d) => d.Target?.Id);
    if (!ids.includes(instanceId)) return false;
  }
  return true;
}
