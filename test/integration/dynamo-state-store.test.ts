import { randomBytes } from 'node:crypto';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import {
  DeleteCommand,
  DynamoDBDocumentClient,
  PutCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { beforeEach, describe, expect, it } from 'vitest';
import { DynamoStateStore } from '../../functions/state/dynamo-state-store';
import { leasePk, serviceLeasePk, servicePk } from '../../functions/state/table-layout';
import { type Lease } from '../../functions/runtime/ports';
import { BusyError, InvariantError, RetryableError } from '../../functions/core/errors';
import { hostSetOf, type Host } from '../../functions/core/hosts';
import type { EligibleHosts } from '../../functions/core/node-sync-plan';
import type { ServiceRecord } from '../../functions/sync/ports';
import { AwsCallRecorder } from '../../kit/aws-calls';
import { MotoAccount } from '../../kit/moto';
import { ManualClock } from '../../kit/manual-clock';
import { callerRoleOption } from '../../functions/aws/caller-role';

/** The store's clients are built as the functions build theirs (their calls are evaluated). */
const functionsRole = callerRoleOption('functions');

const t0 = Date.parse('2025-03-01T12:00:00.000Z');
const ttl = 30;
const webPk = servicePk('default/web');
const webLease = serviceLeasePk('default/web');

/** A clock the test moves by hand, so leases expire when the test says so. */
const account = new MotoAccount();
let tables = 0;
let doc: DynamoDBDocumentClient;
let tableName: string;
let clock: ManualClock;
let store: DynamoStateStore;

async function createTable(): Promise<string> {
  const name = `state-${++tables}`;
  await account.client(DynamoDBClient).send(
    new CreateTableCommand({
      TableName: name,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    }),
  );
  return name;
}

beforeEach(async () => {
  tableName = await createTable();
  doc = DynamoDBDocumentClient.from(account.client(DynamoDBClient));
  clock = new ManualClock(t0);
  store = new DynamoStateStore(doc, tableName, clock);
});

async function take(pk: string, owner: string, seconds = ttl): Promise<Lease> {
  const result = await store.acquire(pk, owner, seconds);
  if (!result.acquired) throw new Error(`expected ${owner} to take the lease on ${pk}`);
  return result.lease;
}

function record(key: string, uid: string, hostsHash?: string): ServiceRecord {
  const [namespace, name] = key.split('/');
  return {
    key,
    uid,
    snapshot: { metadata: { namespace, name, uid } },
    provider: { loadBalancerArn: `arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/${uid}` },
    ...(hostsHash !== undefined ? { hostsHash } : {}),
    updatedAt: '2025-03-01T12:00:00.000Z',
  };
}

/** A host whose JSON is 110 characters plus `padding`, whatever `i` is (below a million). */
function host(i: number, padding = 0): Host {
  const id = i.toString(16).padStart(17, '0');
  return {
    name: `node-${String(i).padStart(6, '0')}${'x'.repeat(padding)}`,
    providerID: `aws:///us-east-1a/i-${id}`,
    instanceId: `i-${id}`,
  };
}

function eligible(hosts: readonly Host[], warnedNodes: readonly string[] = []): EligibleHosts {
  return { ...hostSetOf(hosts), warnedNodes };
}

describe('leases', () => {
  it('takes a free lease item with fence 1, no failures, and an expiry ttl seconds ahead', async () => {
    const result = await store.acquire(webLease, 'worker-a', ttl);
    expect(result).toEqual({
      acquired: true,
      lease: {
        id: webLease,
        owner: 'worker-a',
        fence: 1,
        failures: 0,
        unverified: false,
        pendingChange: false,
        keptSlots: [],
      },
    });
    expect(await store.getItem(webLease)).toMatchObject({
      leaseOwner: 'worker-a',
      leaseUntil: t0 + 30_000,
      fence: 1,
      dirty: false,
    });
  });

  it('refuses a held lease, marks the item dirty for the holder and says when the lease runs out', async () => {
    await take(webLease, 'worker-a');
    clock.advance(10);
    expect(await store.acquire(webLease, 'worker-b', ttl)).toEqual({
      acquired: false,
      heldUntil: t0 + 30_000,
    });
    expect(await store.getItem(webLease)).toMatchObject({
      leaseOwner: 'worker-a',
      fence: 1,
      dirty: true,
    });
  });

  it('still refuses at the expiry instant and takes over one millisecond later with fence 2, unverified, owing the pass the dirty mark asked for', async () => {
    await take(webLease, 'worker-a');
    clock.advance(ttl);
    expect(await store.acquire(webLease, 'worker-b', ttl)).toEqual({
      acquired: false,
      heldUntil: t0 + 30_000,
    });
    clock.ms += 1;
    const taken = await store.acquire(webLease, 'worker-b', ttl);
    expect(taken).toEqual({
      acquired: true,
      // worker-a never released: whatever it was doing to AWS may be half done, and it never
      // ran the pass worker-b's refused acquire asked it for.
      lease: {
        id: webLease,
        owner: 'worker-b',
        fence: 2,
        failures: 0,
        unverified: true,
        pendingChange: true,
        keptSlots: [],
      },
    });
    expect(await store.getItem(webLease)).toMatchObject({ leaseOwner: 'worker-b', dirty: false });
  });

  it('a lease released cleanly is taken verified; one released unverified stays so until a release clears it', async () => {
    const first = await take(webLease, 'worker-a');
    await store.finish(first, 'reset', ttl);
    const second = await take(webLease, 'worker-b');
    expect(second.unverified).toBe(false);
    await store.finish(second, 'increment', ttl, true);
    expect(await store.getItem(webLease)).toMatchObject({ unverified: true });
    const third = await take(webLease, 'worker-c');
    expect(third.unverified).toBe(true);
    await store.handBack(third, 'reset', false);
    expect((await store.getItem(webLease))?.unverified).toBeUndefined();
    expect((await take(webLease, 'worker-d')).unverified).toBe(false);
  });

  it('keeps an unverified lease item beside a record, and drops the mark where there is no record to distrust', async () => {
    const lease = await take(webLease, 'worker-a');
    const view = store.fencedBy(lease);
    await view.getService('default/web');
    await view.putService(record('default/web', 'uid-1'));
    await store.finish(lease, 'reset', ttl, true);
    expect(await store.getItem(webLease)).toMatchObject({ unverified: true });

    const other = serviceLeasePk('default/gone');
    const empty = await take(other, 'worker-b');
    expect(await store.fencedBy(empty).getService('default/gone')).toBeUndefined();
    await store.finish(empty, 'reset', ttl, true);
    expect(await store.getItem(other)).toBeUndefined();
  });

  it('releases on finish and deletes the lease item when its holder saw no record', async () => {
    const lease = await take(webLease, 'worker-a');
    expect(await store.fencedBy(lease).getService('default/web')).toBeUndefined();
    expect(await store.finish(lease, 'reset', ttl)).toEqual({ kind: 'released', failures: 0 });
    expect(await store.getItem(webLease)).toBeUndefined();
  });

  it('releases a holder that saw no record with one write, deleting the lease item', async () => {
    const recorder = new AwsCallRecorder();
    const counted = new DynamoStateStore(
      DynamoDBDocumentClient.from(recorder.attach(account.client(DynamoDBClient, functionsRole))),
      tableName,
      clock,
    );
    const result = await counted.acquire(webLease, 'worker-a', ttl);
    if (!result.acquired) throw new Error('expected the lease');
    expect(await counted.fencedBy(result.lease).getService('default/web')).toBeUndefined();
    recorder.calls.length = 0;
    expect(await counted.finish(result.lease, 'reset', ttl)).toEqual({
      kind: 'released',
      failures: 0,
    });
    expect(recorder.calls.map((c) => c.operation)).toEqual(['DeleteItem']);
    expect(await store.getItem(webLease)).toBeUndefined();
  });

  it('a holder that saw no record but was asked for another pass runs again, its lease kept', async () => {
    const lease = await take(webLease, 'worker-a');
    expect(await store.fencedBy(lease).getService('default/web')).toBeUndefined();
    expect(await store.acquire(webLease, 'worker-b', ttl)).toMatchObject({ acquired: false });
    expect(await store.finish(lease, 'reset', ttl)).toEqual({ kind: 'again' });
    expect(await store.getItem(webLease)).toMatchObject({ leaseOwner: 'worker-a', dirty: false });
  });

  it('keeps the lease item of a holder that never read the record (it cannot know it is gone)', async () => {
    const lease = await take(webLease, 'worker-a');
    await store.finish(lease, 'reset', ttl);
    expect(await store.getItem(webLease)).toMatchObject({ fence: 1, failures: 0 });
  });

  it('keeps a released lease item beside a record, without lease fields, stamped with lastPassAt', async () => {
    const lease = await take(webLease, 'worker-a');
    await store.fencedBy(lease).putService(record('default/web', 'uid-1'));
    clock.advance(5);
    await store.finish(lease, 'reset', ttl);
    const item = await store.getItem(webLease);
    expect(item).toMatchObject({ fence: 1, failures: 0, lastPassAt: '2025-03-01T12:00:05.000Z' });
    expect(item).not.toHaveProperty('leaseOwner');
    expect(item).not.toHaveProperty('leaseUntil');
    expect(item).not.toHaveProperty('rec');
    const recordItem = await store.getItem(webPk);
    expect(recordItem).toMatchObject({ uid: 'uid-1' });
    expect(recordItem).not.toHaveProperty('leaseOwner');
    expect(recordItem).not.toHaveProperty('fence');
  });

  // DynamoDB bills a write by the larger of the item before and after, per started KB.
  it('keeps the lease item under 1 KB beside a record of several KB, so lease writes cost 1 unit', async () => {
    const lease = await take(webLease, `worker-${'a'.repeat(60)}`);
    const big = record('default/web', 'uid-1');
    await store.fencedBy(lease).putService({
      ...big,
      snapshot: {
        ...big.snapshot,
        // Random, so it stays several KB compressed.
        metadata: {
          ...big.snapshot.metadata,
          annotations: { note: randomBytes(4000).toString('base64') },
        },
      },
    });
    await store.finish(lease, 'increment', ttl);
    const size = (item: Record<string, unknown> | undefined) =>
      Object.entries(item ?? {}).reduce(
        (n, [name, value]) =>
          n + name.length + (value instanceof Uint8Array ? value.byteLength : String(value).length),
        0,
      );
    expect(size(await store.getItem(webPk))).toBeGreaterThan(3000);
    expect(size(await store.getItem(webLease))).toBeLessThan(1024);
  });

  it('makes no delete attempt when releasing an item that still holds a record (a billed write)', async () => {
    const recorder = new AwsCallRecorder();
    const counted = new DynamoStateStore(
      DynamoDBDocumentClient.from(recorder.attach(account.client(DynamoDBClient, functionsRole))),
      tableName,
      clock,
    );
    const lease = await take(webLease, 'worker-a');
    await counted.fencedBy(lease).putService(record('default/web', 'uid-1'));
    recorder.reset();
    expect(await counted.finish(lease, 'reset', ttl)).toEqual({ kind: 'released', failures: 0 });
    expect(recorder.byOperation()).toEqual({ 'DynamoDB.UpdateItem': 1 });
  });

  it('counts failures up with increment, keeps them with keep and clears them with reset', async () => {
    let lease = await take(webLease, 'worker-a');
    expect(await store.finish(lease, 'increment', ttl)).toEqual({ kind: 'released', failures: 1 });
    lease = await take(webLease, 'worker-b');
    expect(lease.failures).toBe(1);
    expect(await store.finish(lease, 'increment', ttl)).toEqual({ kind: 'released', failures: 2 });
    lease = await take(webLease, 'worker-c');
    expect(await store.finish(lease, 'keep', ttl)).toEqual({ kind: 'released', failures: 2 });
    lease = await take(webLease, 'worker-d');
    expect(lease).toMatchObject({ fence: 4, failures: 2 });
    await store.fencedBy(lease).getService('default/web');
    expect(await store.finish(lease, 'reset', ttl)).toEqual({ kind: 'released', failures: 0 });
    expect(await store.getItem(webLease)).toBeUndefined();
  });

  it('answers again when the item was marked dirty, clears the flag and extends the lease', async () => {
    const lease = await take(webLease, 'worker-a');
    await store.acquire(webLease, 'worker-b', ttl);
    clock.advance(10);
    expect(await store.finish(lease, 'reset', ttl)).toEqual({ kind: 'again' });
    expect(await store.getItem(webLease)).toMatchObject({
      leaseOwner: 'worker-a',
      leaseUntil: t0 + 10_000 + 30_000,
      fence: 1,
      dirty: false,
    });
    expect(await store.finish(lease, 'reset', ttl)).toEqual({ kind: 'released', failures: 0 });
  });

  it('answers lost when the lease expired and another owner took it, leaving the new lease alone', async () => {
    const stale = await take(webLease, 'worker-a');
    clock.advance(ttl + 1);
    await take(webLease, 'worker-b');
    expect(await store.finish(stale, 'increment', ttl)).toEqual({ kind: 'lost' });
    const item = await store.getItem(webLease);
    expect(item).toMatchObject({ leaseOwner: 'worker-b', fence: 2, dirty: false });
    expect(item).not.toHaveProperty('failures');
  });

  it('answers lost, and does not bring the item back, after the newer holder released it', async () => {
    const stale = await take(webLease, 'worker-a');
    clock.advance(ttl + 1);
    const newer = await take(webLease, 'worker-b');
    await store.fencedBy(newer).getService('default/web');
    await store.finish(newer, 'reset', ttl);
    expect(await store.finish(stale, 'reset', ttl)).toEqual({ kind: 'lost' });
    expect(await store.getItem(webLease)).toBeUndefined();
  });

  it('stamps when a run of failures began, keeps it while failures go on, and drops it on success', async () => {
    const first = await take(webLease, 'worker-a');
    await store.putService(record('default/web', 'uid-1'), first);
    await store.finish(first, 'increment', ttl);
    expect(await store.getItem(webLease)).toMatchObject({ failures: 1, failingSince: t0 });
    clock.advance(60);
    await store.finish(await take(webLease, 'worker-a'), 'increment', ttl);
    await store.finish(await take(webLease, 'worker-a'), 'keep', ttl);
    expect(await store.getItem(webLease)).toMatchObject({ failures: 2, failingSince: t0 });
    await store.finish(await take(webLease, 'worker-a'), 'reset', ttl);
    const item = await store.getItem(webLease);
    expect(item).toMatchObject({ failures: 0 });
    expect(item).not.toHaveProperty('failingSince');
  });

  it('hands a dirty lease back: released with the failure update applied, the flag cleared, the key free for the next message', async () => {
    const lease = await take(webLease, 'worker-a');
    await store.putService(record('default/web', 'uid-1'), lease);
    await store.acquire(webLease, 'worker-b', ttl);
    expect(await store.handBack(lease, 'increment')).toEqual({ kind: 'released', failures: 1 });
    const left = await store.getItem(webLease);
    expect(left).toMatchObject({ dirty: false, failures: 1 });
    expect(left).not.toHaveProperty('leaseOwner');
    expect((await store.acquire(webLease, 'worker-c', ttl)).acquired).toBe(true);
  });

  it('refuses to hand back a lease another owner took over', async () => {
    const stale = await take(webLease, 'worker-a');
    clock.advance(ttl + 1);
    await take(webLease, 'worker-b');
    expect(await store.handBack(stale, 'keep')).toEqual({ kind: 'lost' });
    expect(await store.getItem(webLease)).toMatchObject({ leaseOwner: 'worker-b', fence: 2 });
  });

  it('keeps a global lease item and its bookkeeping when the lease is released', async () => {
    const pk = leasePk('node-sync');
    const lease = await take(pk, 'worker-a');
    await store.setAttributes(pk, { chain: 'chain-1', lastTickAt: t0 });
    expect(await store.finish(lease, 'keep', ttl)).toEqual({ kind: 'released', failures: 0 });
    const item = await store.getItem(pk);
    expect(item).toMatchObject({ pk: 'lease#node-sync', chain: 'chain-1', lastTickAt: t0 });
    expect(item).not.toHaveProperty('leaseOwner');
  });
});

describe('fenced writes', () => {
  it('stores a record under the lease with uid and hostsHash copied out for scans', async () => {
    const lease = await take(webLease, 'worker-a');
    const written = record('default/web', 'uid-1', 'hash-1');
    await store.fencedBy(lease).putService(written);
    expect(await store.getService('default/web')).toEqual(written);
    expect(await store.getItem(webPk)).toMatchObject({
      uid: 'uid-1',
      hostsHash: 'hash-1',
      ver: expect.any(String) as unknown,
    });
    expect(await store.getItem(webLease)).toMatchObject({ leaseOwner: 'worker-a' });
  });

  it('refuses, with BusyError, a write from a holder whose lease expired and was taken over', async () => {
    const stale = await take(webLease, 'worker-a');
    clock.advance(ttl + 1);
    const newer = await take(webLease, 'worker-b');
    await store.fencedBy(newer).putService(record('default/web', 'uid-new'));
    await expect(
      store.fencedBy(stale).putService(record('default/web', 'uid-old')),
    ).rejects.toBeInstanceOf(BusyError);
    expect((await store.getService('default/web'))?.uid).toBe('uid-new');
  });

  it('refuses a write from a holder whose lease was taken over by the same owner name', async () => {
    const stale = await take(webLease, 'worker-a');
    clock.advance(ttl + 1);
    const newer = await take(webLease, 'worker-a');
    await store.fencedBy(newer).putService(record('default/web', 'uid-new'));
    await expect(
      store.fencedBy(stale).putService(record('default/web', 'uid-old')),
    ).rejects.toBeInstanceOf(BusyError);
    expect((await store.getService('default/web'))?.uid).toBe('uid-new');
  });

  it('refuses a stale write after the lease item was removed and leased again from fence 1', async () => {
    const stale = await take(webLease, 'worker-a');
    await store.fencedBy(stale).getService('default/web');
    clock.advance(ttl + 1);
    const removed = await take(webLease, 'worker-b');
    await store.fencedBy(removed).getService('default/web');
    await store.finish(removed, 'reset', ttl);
    expect(await store.getItem(webLease)).toBeUndefined();
    const fresh = await take(webLease, 'worker-c');
    expect(fresh.fence).toBe(stale.fence);
    await store.fencedBy(fresh).getService('default/web');
    await store.fencedBy(fresh).putService(record('default/web', 'uid-new'));
    await expect(
      store.fencedBy(stale).putService(record('default/web', 'uid-old')),
    ).rejects.toBeInstanceOf(BusyError);
    expect((await store.getService('default/web'))?.uid).toBe('uid-new');
  });

  it('refuses a stale delete with BusyError after a newer holder wrote, and keeps its record', async () => {
    const stale = await take(webLease, 'worker-a');
    await store.fencedBy(stale).putService(record('default/web', 'uid-1'));
    clock.advance(ttl + 1);
    const newer = await take(webLease, 'worker-b');
    const view = store.fencedBy(newer);
    await view.putService({
      ...((await view.getService('default/web')) as ServiceRecord),
      hostsHash: 'h2',
    });
    await expect(store.fencedBy(stale).deleteService('default/web')).rejects.toBeInstanceOf(
      BusyError,
    );
    expect(await store.getService('default/web')).toMatchObject({ uid: 'uid-1', hostsHash: 'h2' });
  });

  // A newer holder that read before a stale holder's late write must not write on that read.
  it('refuses the newer holder a write on a read older than a stale write, and has it run again', async () => {
    const stale = await take(webLease, 'worker-a');
    const staleView = store.fencedBy(stale);
    await staleView.getService('default/web');
    clock.advance(ttl + 1);
    const newer = await take(webLease, 'worker-b');
    const newerView = store.fencedBy(newer);
    expect(await newerView.getService('default/web')).toBeUndefined();
    // Nothing newer was written yet: the stale holder's record of what it did lands.
    await staleView.putService(record('default/web', 'uid-stale'));
    await expect(newerView.putService(record('default/web', 'uid-newer'))).rejects.toBeInstanceOf(
      BusyError,
    );
    expect((await store.getService('default/web'))?.uid).toBe('uid-stale');
    // Its lease is marked dirty: the pass ends busy and the holder runs again on a fresh read.
    expect(await store.finish(newer, 'keep', ttl)).toEqual({ kind: 'again' });
    expect((await newerView.getService('default/web'))?.uid).toBe('uid-stale');
    await newerView.putService(record('default/web', 'uid-newer'));
    expect((await store.getService('default/web'))?.uid).toBe('uid-newer');
    await expect(staleView.putService(record('default/web', 'uid-stale-2'))).rejects.toBeInstanceOf(
      BusyError,
    );
    expect(await store.finish(stale, 'keep', ttl)).toEqual({ kind: 'lost' });
  });

  // The tombstone: without it a stale creator's first write (nothing seen) would land again.
  it('refuses a stale creator to bring back a record a newer holder deleted', async () => {
    const stale = await take(webLease, 'worker-a');
    await store.fencedBy(stale).getService('default/web');
    clock.advance(ttl + 1);
    const newer = await take(webLease, 'worker-b');
    const view = store.fencedBy(newer);
    await view.getService('default/web');
    await view.putService(record('default/web', 'uid-1'));
    await view.deleteService('default/web');
    await store.finish(newer, 'reset', ttl);
    expect(await store.getItem(webLease)).toBeUndefined();
    await expect(
      store.fencedBy(stale).putService(record('default/web', 'uid-1')),
    ).rejects.toBeInstanceOf(BusyError);
    expect(await store.getService('default/web')).toBeUndefined();
    expect(await store.getItem(webPk)).toEqual({
      pk: webPk,
      ver: expect.any(String) as unknown,
      expiresAt: Math.ceil(clock.ms / 1000) + 24 * 3600,
    });
  });

  it('refuses to delete a key the lease does not cover', async () => {
    const other = serviceLeasePk('default/other');
    const lease = await take(other, 'worker-a');
    await store.fencedBy(lease).putService(record('default/other', 'uid-other'));
    await expect(store.fencedBy(lease).deleteService('default/web')).rejects.toThrow(
      'lease svclease#default/other does not cover default/web',
    );
    expect((await store.getService('default/other'))?.uid).toBe('uid-other');
  });

  it('removes the record on delete, leaving a tombstone, and the lease item on release', async () => {
    const lease = await take(webLease, 'worker-a');
    await store.fencedBy(lease).putService(record('default/web', 'uid-1', 'hash-1'));
    await store.fencedBy(lease).deleteService('default/web');
    expect(await store.getService('default/web')).toBeUndefined();
    const tombstone = await store.getItem(webPk);
    expect(tombstone).not.toHaveProperty('uid');
    expect(tombstone).not.toHaveProperty('hostsHash');
    expect(await store.getItem(webLease)).toMatchObject({ leaseOwner: 'worker-a' });
    await store.finish(lease, 'reset', ttl);
    expect(await store.getItem(webLease)).toBeUndefined();
    expect(await store.listServiceItems()).toEqual([]);
    expect(await store.listServiceHosts()).toEqual([]);
  });

  // Node sync writes the host set through the lease port: a taken-over holder must not win.
  it('refuses a host-set write from a node-sync holder whose lease was taken over', async () => {
    const pk = leasePk('node-sync');
    const stale = await take(pk, 'worker-a');
    clock.advance(ttl + 1);
    const newer = await take(pk, 'worker-b');
    const current = eligible([host(1), host(2)]);
    await store.fencedBy(newer).putEligibleHosts(current);
    await expect(
      store.fencedBy(stale).putEligibleHosts(eligible([host(1)])),
    ).rejects.toBeInstanceOf(BusyError);
    expect((await store.getEligibleHosts())?.hash).toBe(current.hash);
  });

  it("node sync's host-set write is one conditional Put fenced on the meta item; a Service sync's first set carries no fence", async () => {
    // Before node sync ever ran, a Service's sync stores the set (checked on its own lease).
    const service = await take(serviceLeasePk('default/web'), 'worker-s');
    await store.fencedBy(service).putEligibleHosts(eligible([host(1)]));
    expect((await store.getItem('hosts#meta'))?.fence).toBeUndefined();
    // Node sync replaces it whatever its fence, and leaves its own.
    const run = await take(leasePk('node-sync'), 'worker-a');
    const next = eligible([host(1), host(2)]);
    await store.fencedBy(run).putEligibleHosts(next);
    expect((await store.getItem('hosts#meta'))?.fence).toBe(run.fence);
    expect((await store.getEligibleHosts())?.hash).toBe(next.hash);
  });

  it('refuses to store a record for a key the lease does not cover', async () => {
    const lease = await take(serviceLeasePk('default/other'), 'worker-a');
    await expect(
      store.fencedBy(lease).putService(record('default/web', 'uid-web')),
    ).rejects.toBeInstanceOf(BusyError);
    expect(await store.getService('default/other')).toBeUndefined();
  });
});

describe('scans', () => {
  async function storeRecord(key: string, uid: string, hostsHash?: string): Promise<void> {
    const lease = await take(serviceLeasePk(key), `writer-${uid}`);
    await store.fencedBy(lease).putService(record(key, uid, hostsHash));
    await store.finish(lease, 'reset', ttl);
  }

  it('lists the host hash of every service with a record, and nothing else', async () => {
    await storeRecord('default/a', 'uid-a', 'hash-a');
    await storeRecord('default/b', 'uid-b');
    await take(serviceLeasePk('default/held'), 'worker-x');
    await take(leasePk('node-sync'), 'worker-y');
    await store.putEligibleHosts(eligible([host(1)]));
    const listed = await store.listServiceHosts();
    expect(listed.sort((x, y) => x.key.localeCompare(y.key))).toEqual([
      { key: 'default/a', hostsHash: 'hash-a' },
      { key: 'default/b', hostsHash: undefined },
    ]);
  });

  it('lists each Service’s target-node-labels selector beside its host hash', async () => {
    const lease = await take(serviceLeasePk('default/picky'), 'writer-picky');
    await store
      .fencedBy(lease)
      .putService({ ...record('default/picky', 'uid-p', 'hash-p'), nodeSelector: 'role=ingress' });
    expect(await store.listServiceHosts()).toEqual([
      { key: 'default/picky', hostsHash: 'hash-p', nodeSelector: 'role=ingress' },
    ]);
  });

  it('lists every service item with record presence, failures, dirty flag and lease expiry', async () => {
    await storeRecord('default/a', 'uid-a', 'hash-a');
    const failing = await take(serviceLeasePk('default/b'), 'worker-b');
    await store.finish(failing, 'increment', ttl);
    await take(serviceLeasePk('default/c'), 'worker-c');
    await store.acquire(serviceLeasePk('default/c'), 'worker-d', ttl);
    await take(leasePk('sweep'), 'worker-e');
    const items = await store.listServiceItems();
    expect(items.sort((x, y) => x.key.localeCompare(y.key))).toEqual([
      { key: 'default/a', uid: 'uid-a', hasRecord: true, failures: 0, dirty: false },
      { key: 'default/b', hasRecord: false, failures: 1, dirty: false, failingSince: t0 },
      { key: 'default/c', hasRecord: false, failures: 0, dirty: true, leaseUntil: t0 + 30_000 },
    ]);
  });
});

describe('upgrade from release 0.1 (its lease on the record item)', () => {
  /** An item as release 0.1 wrote it, raw: the record and its lease attributes together. */
  async function putLegacyItem(attributes: Record<string, unknown>): Promise<void> {
    await doc.send(new PutCommand({ TableName: tableName, Item: { pk: webPk, ...attributes } }));
  }
  const legacyRecord = {
    rec: JSON.stringify(record('default/web', 'uid-1', 'hash-1')),
    uid: 'uid-1',
    hostsHash: 'hash-1',
    nodeSelector: '',
    updatedAt: '2025-03-01T12:00:00.000Z',
    fence: 3,
    dirty: false,
    failures: 0,
    lastPassAt: '2025-03-01T11:59:00.000Z',
  };

  it('reads the record of a 0.1 item, for holders, scans and plain reads', async () => {
    await putLegacyItem(legacyRecord);
    expect(await store.getService('default/web')).toEqual(record('default/web', 'uid-1', 'hash-1'));
    const lease = await take(webLease, 'worker-new');
    expect((await store.fencedBy(lease).getService('default/web'))?.uid).toBe('uid-1');
    expect(await store.listServiceHosts()).toEqual([{ key: 'default/web', hostsHash: 'hash-1' }]);
    expect(await store.listServiceItems()).toEqual([
      {
        key: 'default/web',
        uid: 'uid-1',
        hasRecord: true,
        failures: 0,
        dirty: false,
        leaseUntil: t0 + 30_000,
      },
    ]);
  });

  it('treats a key whose 0.1 lease is live as busy: the 0.1 holder runs again, nothing is written until it expires', async () => {
    await putLegacyItem({ ...legacyRecord, leaseOwner: 'worker-old', leaseUntil: t0 + 30_000 });
    const lease = await take(webLease, 'worker-new');
    const view = store.fencedBy(lease);
    await expect(view.getService('default/web')).rejects.toBeInstanceOf(BusyError);
    expect(await store.getItem(webPk)).toMatchObject({ leaseOwner: 'worker-old', dirty: true });
    await expect(view.putService(record('default/web', 'uid-2'))).rejects.toBeInstanceOf(BusyError);
    expect((await store.getService('default/web'))?.uid).toBe('uid-1');
    clock.advance(31);
    expect((await view.getService('default/web'))?.uid).toBe('uid-1');
  });

  it('converts a 0.1 item on its first write, so a late 0.1 holder can no longer write', async () => {
    await putLegacyItem({ ...legacyRecord, leaseOwner: 'worker-old', leaseUntil: t0 + 30_000 });
    clock.advance(31);
    const lease = await take(webLease, 'worker-new');
    const view = store.fencedBy(lease);
    const read = await view.getService('default/web');
    await view.putService({ ...(read as ServiceRecord), hostsHash: 'hash-2' });
    const item = await store.getItem(webPk);
    expect(item).toMatchObject({ uid: 'uid-1', hostsHash: 'hash-2' });
    for (const name of ['leaseOwner', 'leaseUntil', 'fence', 'dirty', 'failures', 'lastPassAt'])
      expect(item).not.toHaveProperty(name);
    // Release 0.1's fenced write, as it sends it.
    await expect(
      doc.send(
        new UpdateCommand({
          TableName: tableName,
          Key: { pk: webPk },
          ConditionExpression: 'leaseOwner = :owner AND fence = :fence',
          UpdateExpression: 'SET hostsHash = :hash',
          ExpressionAttributeValues: { ':owner': 'worker-old', ':fence': 3, ':hash': 'old' },
        }),
      ),
    ).rejects.toBeInstanceOf(ConditionalCheckFailedException);
  });

  it('removes a 0.1 item left with failures and no record once a release finds the Service gone', async () => {
    await putLegacyItem({ fence: 3, dirty: false, failures: 2, failingSince: t0 });
    expect(await store.listServiceItems()).toEqual([
      { key: 'default/web', hasRecord: false, failures: 2, dirty: false, failingSince: t0 },
    ]);
    const lease = await take(webLease, 'worker-new');
    expect(await store.fencedBy(lease).getService('default/web')).toBeUndefined();
    await store.finish(lease, 'reset', ttl);
    expect(await store.getItem(webPk)).toBeUndefined();
    expect(await store.getItem(webLease)).toBeUndefined();
    expect(await store.listServiceItems()).toEqual([]);
  });
});

describe('record format', () => {
  /** Writes `written` as a holder of its lease does: read first, then the conditioned write. */
  async function storeAsHolder(written: ServiceRecord): Promise<void> {
    const view = store.fencedBy(await take(serviceLeasePk(written.key), 'worker-a'));
    await view.getService(written.key);
    await view.putService(written);
  }

  it('stores the record compressed in recz, beside uid, hostsHash and nodeSelector, under 1 KB', async () => {
    await storeAsHolder(record('default/web', 'uid-1', 'hash-1'));
    const item = await store.getItem(webPk);
    expect(item?.recz).toBeInstanceOf(Uint8Array);
    expect(item).not.toHaveProperty('rec');
    expect(item).toMatchObject({ uid: 'uid-1', hostsHash: 'hash-1' });
    expect(await store.getService('default/web')).toEqual(record('default/web', 'uid-1', 'hash-1'));
  });

  it('after a rollback, 0.1’s JSON written over a compressed record is the newer and is read', async () => {
    await storeAsHolder(record('default/web', 'uid-1', 'hash-1'));
    // Release 0.1's record write, as it sends it (SET, so recz stays).
    await doc.send(
      new UpdateCommand({
        TableName: tableName,
        Key: { pk: webPk },
        UpdateExpression: 'SET rec = :rec, uid = :uid, hostsHash = :hash',
        ExpressionAttributeValues: {
          ':rec': JSON.stringify(record('default/web', 'uid-1', 'hash-0.1')),
          ':uid': 'uid-1',
          ':hash': 'hash-0.1',
        },
      }),
    );
    expect((await store.getService('default/web'))?.hostsHash).toBe('hash-0.1');
  });

  it('after a rollback, a record 0.1 deleted (rec and uid removed, recz left) is gone', async () => {
    await storeAsHolder(record('default/web', 'uid-1', 'hash-1'));
    await doc.send(
      new UpdateCommand({
        TableName: tableName,
        Key: { pk: webPk },
        UpdateExpression: 'REMOVE rec, uid, hostsHash, nodeSelector',
      }),
    );
    expect(await store.getService('default/web')).toBeUndefined();
    expect(await store.listServiceHosts()).toEqual([]);
  });

  it('a record in a format this release does not know is an invariant error, not a missing record', async () => {
    await doc.send(
      new PutCommand({
        TableName: tableName,
        Item: { pk: webPk, recz: Uint8Array.of(9, 1, 2, 3), uid: 'uid-1', ver: 'v' },
      }),
    );
    await expect(store.getService('default/web')).rejects.toBeInstanceOf(InvariantError);
  });
});

describe('eligible hosts', () => {
  it('has no host set before one is stored', async () => {
    expect(await store.getEligibleHosts()).toBeUndefined();
  });

  it('stores a small set in one chunk keyed by its hash and reads it back with the warned nodes', async () => {
    const set = eligible([host(1), host(2), host(3)], ['fargate-node']);
    await store.putEligibleHosts(set);
    expect(await store.getEligibleHosts()).toEqual(set);
    expect(await store.getItem('hosts#meta')).toMatchObject({
      hash: set.hash,
      chunks: 1,
      warnedNodes: ['fargate-node'],
      updatedAt: '2025-03-01T12:00:00.000Z',
    });
    expect(await store.getItem(`hosts#chunk#${set.hash}#0`)).toBeDefined();
  });

  it('splits a set larger than one item into chunks that each fit and reads it back in order', async () => {
    // Each host is 240 characters of JSON: 6000 hosts are about 1.4 MB, far over the 400 KB item limit.
    const hosts = Array.from({ length: 6000 }, (_, i) => host(i, 130));
    expect(JSON.stringify(hosts[0]).length).toBe(240);
    const set = eligible(hosts);
    await store.putEligibleHosts(set);
    const meta = await store.getItem('hosts#meta');
    // 350 000 bytes per chunk at 241 bytes per host: 1452 hosts per chunk, so five chunks.
    expect(meta?.chunks).toBe(5);
    for (let i = 0; i < 5; i++) {
      const chunk = await store.getItem(`hosts#chunk#${set.hash}#${i}`);
      expect(Buffer.byteLength(String(chunk?.hosts))).toBeLessThanOrEqual(350_000);
    }
    const read = await store.getEligibleHosts();
    expect(read?.hosts).toHaveLength(6000);
    expect(read?.hosts.map((h) => h.name)).toEqual(set.hosts.map((h) => h.name));
    expect(read?.hash).toBe(set.hash);
  });

  it('deletes the previous set’s chunks when a set with another hash replaces it', async () => {
    const before = eligible([host(1)]);
    const after = eligible([host(1), host(2)]);
    await store.putEligibleHosts(before);
    await store.putEligibleHosts(after);
    expect(await store.getItem(`hosts#chunk#${before.hash}#0`)).toBeUndefined();
    expect(await store.getItem(`hosts#chunk#${after.hash}#0`)).toBeDefined();
    expect(await store.getEligibleHosts()).toEqual(after);
  });

  it('keeps the chunks when the same set is stored again with other warned nodes', async () => {
    const set = eligible([host(1)]);
    await store.putEligibleHosts(set);
    await store.putEligibleHosts({ ...set, warnedNodes: ['node-x'] });
    expect(await store.getEligibleHosts()).toEqual({ ...set, warnedNodes: ['node-x'] });
  });

  it('keeps tracked node labels, and names chunks by them so a relabel never rewrites chunks in place', async () => {
    const labelled = (role: string) => ({ ...host(1), labels: { role } });
    const first = {
      ...eligible([labelled('ingress')]),
      labelKeys: ['role'],
      labelsHash: 'labels-1',
    };
    const second = { ...first, hosts: [labelled('batch')], labelsHash: 'labels-2' };
    await store.putEligibleHosts(first);
    expect(await store.getEligibleHosts()).toEqual(first);
    await store.putEligibleHosts(second);
    expect(await store.getEligibleHosts()).toEqual(second);
    // Same names and providerIDs (same hash), other labels: new chunks, the old ones gone.
    expect(second.hash).toBe(first.hash);
    expect(await store.getItem(`hosts#chunk#${first.hash}.labels-2#0`)).toBeDefined();
    expect(await store.getItem(`hosts#chunk#${first.hash}.labels-1#0`)).toBeUndefined();
  });

  it('reports a set whose chunk is missing (being rewritten) as retryable', async () => {
    const set = eligible([host(1)]);
    await store.putEligibleHosts(set);
    await doc.send(
      new DeleteCommand({ TableName: tableName, Key: { pk: `hosts#chunk#${set.hash}#0` } }),
    );
    await expect(store.getEligibleHosts()).rejects.toThrow(
      new RetryableError('eligible host set is being rewritten'),
    );
  });
});

describe('bookkeeping attributes', () => {
  it('sets plain attributes, including names with "#", without touching the lease', async () => {
    const pk = leasePk('sweep');
    await take(pk, 'worker-a');
    await store.setAttributes(pk, {
      lastRunAt: '2025-03-01T12:00:00.000Z',
      'orphan#uid-1': t0,
      enabled: true,
    });
    expect(await store.getItem(pk)).toMatchObject({
      leaseOwner: 'worker-a',
      fence: 1,
      lastRunAt: '2025-03-01T12:00:00.000Z',
      'orphan#uid-1': t0,
      enabled: true,
    });
  });
});

describe('table failures', () => {
  function failingStore(): { recorder: AwsCallRecorder; failing: DynamoStateStore } {
    const recorder = new AwsCallRecorder();
    const client = recorder.attach(
      account.client(DynamoDBClient, { maxAttempts: 1, ...functionsRole }),
    );
    return {
      recorder,
      failing: new DynamoStateStore(DynamoDBDocumentClient.from(client), tableName, clock),
    };
  }

  it('reports a server error while reading as a RetryableError naming the action', async () => {
    const { recorder, failing } = failingStore();
    recorder.injectFault({ operation: 'GetItem', kind: 'server-error', times: 1 });
    const error = await failing.getService('default/web').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as RetryableError).message).toBe(
      'state table: read state: Internal failure (injected)',
    );
    expect(recorder.count('GetItem', 'DynamoDB')).toBe(1);
  });

  it('reports throttling while taking a lease as a RetryableError, not as a lease held', async () => {
    const { recorder, failing } = failingStore();
    recorder.injectFault({ operation: 'UpdateItem', kind: 'throttle', times: 1 });
    await expect(failing.acquire(webPk, 'worker-a', ttl)).rejects.toThrow(
      'state table: take lease: Rate exceeded (injected)',
    );
    expect(await store.getItem(webPk)).toBeUndefined();
  });

  it('reports a failed chunk write as retryable and leaves the stored set in place', async () => {
    const before = eligible([host(1)]);
    await store.putEligibleHosts(before);
    const { recorder, failing } = failingStore();
    recorder.injectFault({ operation: 'PutItem', kind: 'server-error', times: 1 });
    await expect(failing.putEligibleHosts(eligible([host(2)]))).rejects.toBeInstanceOf(
      RetryableError,
    );
    expect(await store.getEligibleHosts()).toEqual(before);
  });
});

describe('host set reads', () => {
  it('reads the chunks of an unchanged host set once per instance, and a changed set again', async () => {
    const writer = new DynamoStateStore(doc, tableName, clock);
    const recorder = new AwsCallRecorder();
    const reader = new DynamoStateStore(
      DynamoDBDocumentClient.from(recorder.attach(account.client(DynamoDBClient, functionsRole))),
      tableName,
      clock,
    );
    // Two chunks: 3,000 hosts with long names pass the 350 KB chunk size.
    const big = eligible(Array.from({ length: 3000 }, (_, i) => host(i, 80)));
    await writer.putEligibleHosts(big);
    expect((await reader.getEligibleHosts())?.hosts).toHaveLength(3000);
    expect(recorder.byOperation()).toEqual({ 'DynamoDB.GetItem': 3 });

    recorder.reset();
    expect(await reader.getEligibleHosts()).toEqual(await writer.getEligibleHosts());
    expect(recorder.byOperation()).toEqual({ 'DynamoDB.GetItem': 1 });

    await writer.putEligibleHosts(eligible([host(1), host(2)]));
    recorder.reset();
    expect((await reader.getEligibleHosts())?.hosts.map((h) => h.instanceId)).toEqual([
      host(1).instanceId,
      host(2).instanceId,
    ]);
    expect(recorder.byOperation()).toEqual({ 'DynamoDB.GetItem': 2 });
  });
});

describe("node sync's lease with its minimum interval in the same write (issue 37)", () => {
  const gate = { minIntervalMs: 10_000, chains: [] };
  const nodeSyncLease = leasePk('node-sync');

  it('refuses a run within the interval without writing anything, and says when it is due', async () => {
    await store.recordNodeSyncRun(t0 - 4_000);
    const before = await store.getItem(nodeSyncLease);
    expect(await store.acquireNodeSyncLease('worker-a', ttl, gate)).toEqual({
      acquired: false,
      tooSoon: true,
      dueAtMs: t0 + 6_000,
    });
    expect(await store.getItem(nodeSyncLease)).toEqual(before);
    // Once the interval is up, the same call takes the lease.
    clock.ms = t0 + 6_000;
    expect(await store.acquireNodeSyncLease('worker-a', ttl, gate)).toMatchObject({
      acquired: true,
      lease: { id: nodeSyncLease, owner: 'worker-a', fence: 1 },
    });
  });

  it('lets the current chain’s tick through within the interval, but not another chain’s', async () => {
    await store.startTimerChain('chain-1', t0);
    await store.recordNodeSyncRun(t0 - 1_000);
    expect(
      await store.acquireNodeSyncLease('worker-a', ttl, { ...gate, chains: ['chain-0'] }),
    ).toMatchObject({ acquired: false, tooSoon: true });
    expect(
      await store.acquireNodeSyncLease('worker-a', ttl, {
        ...gate,
        chains: ['chain-0', 'chain-1'],
      }),
    ).toMatchObject({ acquired: true });
  });

  it('a first run takes it; a run that is not too soon finds it held and marks it dirty', async () => {
    expect(await store.acquireNodeSyncLease('worker-a', ttl, gate)).toMatchObject({
      acquired: true,
    });
    expect(await store.acquireNodeSyncLease('worker-b', ttl, gate)).toEqual({
      acquired: false,
      heldUntil: t0 + ttl * 1000,
    });
    expect((await store.getItem(nodeSyncLease))?.dirty).toBe(true);
  });
});
