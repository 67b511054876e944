/**
 * 10,000 LoadBalancer Services on 5,000 nodes (issue 21 item 5): what grows with the cluster and
 * what breaks first.
 *
 * - Node-change completion: the propagation simulation (same runtime, fakes and buckets) at
 *   10,000 Services, against the API floor (2 RegisterTargets per Service at 4/s). It runs on 3
 *   nodes: the number of nodes changes what each call carries, not how many calls there are.
 * - Sizes from the functions' own serialisation: a Service's record item at 5,000 nodes with
 *   and without the recorded-target limit (nlb-state.ts), the host set's chunks as
 *   DynamoStateStore.putEligibleHosts writes them, and the sweep's scan of the whole table as
 *   DynamoStateStore.listServiceItems pages it, over a document client that serves the items
 *   in 1 MB pages and bills them as DynamoDB does (strongly consistent: 1 read unit per 4 KB of
 *   items read, whatever the filter and projection keep).
 * - Hot keys: the items every host update or registration touches, per second of the node change.
 */
import { encodeRecord } from '../../functions/state/record-codec';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { DynamoStateStore } from '../../functions/state/dynamo-state-store';
import { toProviderState, maxRecordedTargets } from '../../functions/nlb/nlb-state';
import { hostSetOf, type Host } from '../../functions/core/hosts';
import type { ServiceRecord } from '../../functions/sync/ports';
import { makeService } from '../../kit/core-objects';
import { simulateOurs, type OursRun } from './propagation';
import {
  serviceLeasePk,
  serviceLeasePrefix,
  servicePk,
  servicePrefix,
} from '../../functions/state/table-layout';

export const scaleModel = {
  services: 10_000,
  nodes: 5_000,
  portsPerService: 2,
  /** One Scan page: DynamoDB returns at most 1 MB of items read per request. */
  pageBytes: 1024 * 1024,
  /** Per remote call, as in the propagation model. */
  latencyMs: 50,
  /** DynamoDB's per-partition limits (AWS docs, "Partitions and data distribution"). */
  partitionReadUnitsPerSecond: 3000,
  partitionWriteUnitsPerSecond: 1000,
} as const;

export interface ScaleResult {
  readonly model: typeof scaleModel;
  readonly propagation: OursRun;
  readonly floorMs: number;
  readonly record: {
    readonly bytesUnrecordedTargets: number;
    readonly bytesRecordedTargets: number;
    readonly bytesRecordedTargetsFourPorts: number;
    readonly itemLimitBytes: number;
  };
  readonly hostSet: { readonly chunks: number; readonly bytes: number; readonly readUnits: number };
  readonly sweep: {
    readonly pages: number;
    readonly readUnits: number;
    readonly bytes: number;
    readonly durationMs: number;
    readonly keys: number;
  };
  readonly hotKeys: {
    readonly key: string;
    readonly perSecond: number;
    readonly unitsPerSecond: number;
    readonly limit: number;
  }[];
}

function instanceId(i: number): string {
  return `i-${(0x0a00000000000000n + BigInt(i)).toString(16).padStart(17, '0')}`;
}

function hostOf(i: number): Host {
  return {
    name: `ip-10-${(i >> 16) & 255}-${(i >> 8) & 255}-${i & 255}.eu-west-1.compute.internal`,
    providerID: `aws:///eu-west-1a/${instanceId(i)}`,
    instanceId: instanceId(i),
  };
}

/** DynamoDB's item size: attribute names plus values (strings by UTF-8 length, numbers ~ digits). */
function itemBytes(item: Record<string, unknown>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) {
    bytes += Buffer.byteLength(name);
    bytes +=
      typeof value === 'string'
        ? Buffer.byteLength(value)
        : value instanceof Uint8Array
          ? value.byteLength
          : typeof value === 'number'
            ? Math.ceil(String(value).length / 2) + 1
            : Buffer.byteLength(JSON.stringify(value ?? null));
  }
  return bytes;
}

function recordItem(key: string, ports: number, recordTargets: boolean): Record<string, unknown> {
  const ids = Array.from({ length: scaleModel.nodes }, (_, i) => instanceId(i));
  const groups = Object.fromEntries(
    Array.from({ length: ports }, (_, p) => [
      `${8080 + p}/TCP`,
      {
        arn: `arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/k8s-web-${p}-0123456789/0123456789abcdef`,
        name: `k8s-web-${p}-0123456789`,
        targets: ids,
      },
    ]),
  );
  const state = {
    loadBalancerArn:
      'arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/net/k8s-default-web-0123456789/0123456789abcdef',
    loadBalancerName: 'k8s-default-web-0123456789',
    dnsName: 'k8s-default-web-0123456789-0123456789abcdef.elb.eu-west-1.amazonaws.com',
    securityGroupId: 'sg-0123456789abcdef0',
    targetGroups: groups,
  };
  const provider = recordTargets
    ? (JSON.parse(JSON.stringify(state)) as ServiceRecord['provider'])
    : toProviderState(state);
  const service = makeService({ name: 'web', namespace: 'default', uid: 'uid-web' });
  const record: ServiceRecord = {
    key,
    uid: 'uid-web',
    snapshot: service,
    provider,
    checkpoint: 'c'.repeat(64),
    status: { ingress: [{ hostname: state.dnsName }] },
    hostsHash: 'h'.repeat(64),
    updatedAt: new Date(0).toISOString(),
  };
  // Today's item is compressed (record-codec.ts); the "before" layout kept every target, as JSON.
  return {
    pk: servicePk(key),
    ...(recordTargets ? { rec: JSON.stringify(record) } : { recz: encodeRecord(record) }),
    uid: 'uid-web',
    hostsHash: 'h'.repeat(64),
    ver: recordTargets ? 'v'.repeat(36) : 'v'.repeat(22),
  };
}

/** A document client over an in-memory table: Put and Get as DynamoDB, Scan in 1 MB pages. */
class PagingTable {
  readonly items = new Map<string, Record<string, unknown>>();
  readonly stats = { scanPages: 0, scanReadUnits: 0, scanBytes: 0, writes: 0, writeBytes: 0 };

  asDocumentClient(): DynamoDBDocumentClient {
    return {
      send: (command: object) => {
        const input = (command as { input: Record<string, unknown> }).input;
        switch (command.constructor.name) {
          case 'PutCommand': {
            const item = input.Item as Record<string, unknown>;
            this.items.set(String(item.pk), item);
            this.stats.writes++;
            this.stats.writeBytes += itemBytes(item);
            return Promise.resolve({});
          }
          case 'GetCommand':
            return Promise.resolve({
              Item: this.items.get(String((input.Key as { pk: string }).pk)),
            });
          case 'UpdateCommand':
          case 'TransactWriteCommand':
          case 'DeleteCommand':
          case 'BatchWriteCommand':
            this.stats.writes++;
            return Promise.resolve({});
          case 'ScanCommand':
            return Promise.resolve(this.scanPage(input));
          default:
            return Promise.reject(new Error(`scale bench table: ${command.constructor.name}`));
        }
      },
    } as unknown as DynamoDBDocumentClient;
  }

  private scanPage(input: Record<string, unknown>) {
    const keys = [...this.items.keys()].sort();
    const start = input.ExclusiveStartKey as { pk: string } | undefined;
    let i = start === undefined ? 0 : keys.indexOf(start.pk) + 1;
    let bytes = 0;
    const page: Record<string, unknown>[] = [];
    while (i < keys.length && bytes < scaleModel.pageBytes) {
      const item = this.items.get(keys[i]!)!;
      bytes += itemBytes(item);
      const pk = String(item.pk);
      // The store's filter: Service record and lease items.
      if (pk.startsWith(servicePrefix) || pk.startsWith(serviceLeasePrefix)) {
        page.push({ pk, uid: item.uid, ver: item.ver });
      }
      i++;
    }
    this.stats.scanPages++;
    this.stats.scanBytes += bytes;
    this.stats.scanReadUnits += Math.ceil(bytes / 4096);
    return {
      Items: page,
      ...(i < keys.length ? { LastEvaluatedKey: { pk: keys[i - 1] } } : {}),
    };
  }
}

export async function scale(): Promise<ScaleResult> {
  const m = scaleModel;
  const propagation = await simulateOurs(m.services);
  const floorMs = ((m.services * m.portsPerService) / 4) * 1000;

  const table = new PagingTable();
  const clock = { now: () => new Date(0) };
  const store = new DynamoStateStore(table.asDocumentClient(), 'state', clock);
  const hosts = Array.from({ length: m.nodes }, (_, i) => hostOf(i));
  const writesBefore = table.stats.writeBytes;
  await store.putEligibleHosts({ ...hostSetOf(hosts), warnedNodes: [] });
  const chunkItems = [...table.items.keys()].filter((k) => k.startsWith('hosts#chunk#'));
  const hostSetBytes = table.stats.writeBytes - writesBefore;

  for (let i = 0; i < m.services; i++) {
    const key = `team-${i % 100}/svc-${i}`;
    const item = recordItem(key, m.portsPerService, false);
    table.items.set(String(item.pk), item);
    table.items.set(serviceLeasePk(key), {
      pk: serviceLeasePk(key),
      lastPassAt: new Date(0).toISOString(),
      fence: 12,
    });
  }
  const keys = (await store.listServiceItems()).length;

  const recordBytes = itemBytes(recordItem('default/web', m.portsPerService, false));
  const hostSetReadUnits = Math.ceil(hostSetBytes / 4096);
  const seconds = propagation.maxMs / 1000;
  const hostUpdates = m.services + propagation.budgetRequeues;
  return {
    model: m,
    propagation,
    floorMs,
    record: {
      bytesUnrecordedTargets: recordBytes,
      bytesRecordedTargets: itemBytes(recordItem('default/web', m.portsPerService, true)),
      bytesRecordedTargetsFourPorts: itemBytes(recordItem('default/web', 4, true)),
      itemLimitBytes: 400 * 1024,
    },
    hostSet: { chunks: chunkItems.length, bytes: hostSetBytes, readUnits: hostSetReadUnits },
    sweep: {
      pages: table.stats.scanPages,
      readUnits: table.stats.scanReadUnits,
      bytes: table.stats.scanBytes,
      durationMs: table.stats.scanPages * m.latencyMs,
      keys,
    },
    hotKeys: [
      {
        key: 'budget#elbv2-registration (every RegisterTargets/DeregisterTargets books a slot)',
        perSecond: (propagation.budgetWrites ?? 0) / seconds,
        unitsPerSecond: (propagation.budgetWrites ?? 0) / seconds,
        limit: m.partitionWriteUnitsPerSecond,
      },
      {
        key: 'hosts#meta (read by every host update; the chunks once per instance)',
        perSecond: hostUpdates / seconds,
        unitsPerSecond: hostUpdates / seconds,
        limit: m.partitionReadUnitsPerSecond,
      },
      {
        key: `hosts#chunk#… without the per-instance cache (${chunkItems.length} items, ${hostSetReadUnits} read units a read)`,
        perSecond: hostUpdates / seconds,
        unitsPerSecond: (hostUpdates / seconds) * Math.ceil(hostSetReadUnits / chunkItems.length),
        limit: m.partitionReadUnitsPerSecond,
      },
    ],
  };
}

export { maxRecordedTargets };
