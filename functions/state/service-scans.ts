import type { ServiceKey } from '../core/keys';
import type { ServiceHostsState } from '../core/node-sync-plan';
import type { ServiceItemSummary } from '../runtime/ports';
import type { StateTable } from './state-table';
import { serviceLeasePrefix, servicePrefix } from './table-layout';

// The scans over every Service's record and lease items (node sync, the sweep).

/** Every Service's host hash and selector, for node sync; one scan. */
export async function listServiceHosts(table: StateTable): Promise<ServiceHostsState[]> {
  const result: ServiceHostsState[] = [];
  // A scan bills every item it reads whatever the filter keeps: the lease items of Services
  // whose retry is due later come at no extra cost. Past retryAt the retry is overdue (its
  // message lost, say), and node sync takes the Service again.
  const failing = new Set<ServiceKey>();
  for await (const item of table.scan(
    // uid is written with every record, of either release, and removed with it.
    '(begins_with(pk, :svc) AND attribute_exists(uid)) OR (begins_with(pk, :lease) AND failures > :zero AND retryAt > :now)',
    {
      ':svc': servicePrefix,
      ':lease': serviceLeasePrefix,
      ':zero': 0,
      ':now': table.clock.now().getTime(),
    },
    'pk, hostsHash, nodeSelector',
  )) {
    if (String(item.pk).startsWith(serviceLeasePrefix)) {
      failing.add(String(item.pk).slice(serviceLeasePrefix.length));
      continue;
    }
    const hash =
      typeof item.hostsHash === 'string' && item.hostsHash !== '' ? item.hostsHash : undefined;
    const selector =
      typeof item.nodeSelector === 'string' && item.nodeSelector !== ''
        ? item.nodeSelector
        : undefined;
    result.push({
      key: String(item.pk).slice(servicePrefix.length),
      hostsHash: hash,
      ...(selector !== undefined ? { nodeSelector: selector } : {}),
    });
  }
  return result.map((service) =>
    failing.has(service.key) ? { ...service, retryScheduled: true } : service,
  );
}

/** Every service item, for the sweep: key, whether a record exists, failures, dirty, lease expiry. */
export async function listServiceItems(table: StateTable): Promise<ServiceItemSummary[]> {
  // One scan sees both item kinds of a key: the record item says whether there is a record,
  // the lease item has the lease and failures (a 0.1 record item has both).
  const records = new Map<ServiceKey, Record<string, unknown>>();
  const leases = new Map<ServiceKey, Record<string, unknown>>();
  for await (const item of table.scan(
    'begins_with(pk, :svc) OR begins_with(pk, :lease)',
    { ':svc': servicePrefix, ':lease': serviceLeasePrefix },
    'pk, uid, ver, failures, dirty, leaseUntil, failingSince',
  )) {
    const pk = String(item.pk);
    if (pk.startsWith(servicePrefix)) records.set(pk.slice(servicePrefix.length), item);
    else leases.set(pk.slice(serviceLeasePrefix.length), item);
  }
  const items: ServiceItemSummary[] = [];
  for (const key of new Set([...records.keys(), ...leases.keys()])) {
    const record = records.get(key);
    // uid is written with every record and absent from a tombstone.
    const hasRecord = typeof record?.uid === 'string';
    const lease = leases.get(key) ?? record;
    // A tombstone alone is nothing to sweep.
    if (!hasRecord && leases.get(key) === undefined && typeof record?.ver === 'string') continue;
    items.push({
      key,
      ...(hasRecord ? { uid: String(record?.uid) } : {}),
      hasRecord,
      failures: Number(lease?.failures ?? 0),
      dirty: lease?.dirty === true,
      ...(typeof lease?.leaseUntil === 'number' ? { leaseUntil: lease.leaseUntil } : {}),
      ...(typeof lease?.failingSince === 'number' ? { failingSince: lease.failingSince } : {}),
    });
  }
  return items;
}
