import type { ServiceKey } from '../core/keys';

/**
 * The state table: one DynamoDB table, partition key `pk`. Its item families, and the keys that
 * name them: nothing outside functions/state/ spells a key.
 *
 * | pk                   | holds |
 * | `svc#<ns>/<name>`    | `recz` (the ServiceRecord, compressed: record-codec.ts), `uid`, `hostsHash`, `nodeSelector`; `ver`, a token new on every write; after a delete only `ver` and `expiresAt` (a tombstone). Release 0.1 wrote the record as JSON in `rec` |
 * | `svclease#<ns>/<name>` | the Service's lease: `leaseOwner`, `leaseUntil` (ms), `fence`, `dirty`, `unverified`; `failures`, `failingSince` (ms), `retryAt` (ms), `lastPassAt` |
 * | `lease#<name>`       | a lease for global work (`node-sync`, `sweep`) and that work's bookkeeping |
 * | `hosts#meta`         | the eligible host set's `hash`, `chunkKey`, `warnedNodes`, `labelKeys`, `labelsHash`, `chunks`; `fence`: the node-sync lease's fence of the run that stored it |
 * | `kept#<namespace>`  | `keys`: the namespace's Service keys whose NLB deletion protection keeps (tenant policy counting) |
 * | `hosts#chunk#<chunkKey>#<i>` | part `i` of the host list named by the meta item's `chunkKey` (its `hash`, plus `.labelsHash` when labels are tracked), as JSON (items hold at most 400 KB) |
 * | `evt#<eventId>`      | a lifecycle event EventBridge has not taken yet (`event` as JSON), gone by `expiresAt` (TTL, epoch s) |
 * | `budget#elbv2-registration` | the shared RegisterTargets/DeregisterTargets budget: `tat`, `n0`…`n31`, `f0`…`f31`, `q0`…`q15` (registration-budget-item.ts) |
 */

export const servicePrefix = 'svc#';
export const servicePk = (key: ServiceKey) => `${servicePrefix}${key}`;
/** A Service's lease: not `lease#`, which names the global leases. */
export const serviceLeasePrefix = 'svclease#';
export const serviceLeasePk = (key: ServiceKey) => `${serviceLeasePrefix}${key}`;
/** A namespace's load balancers kept by deletion protection: a string set `keys`. */
export const keptPk = (namespace: string) => `kept#${namespace}`;
export const pendingEventPk = (eventId: string) => `evt#${eventId}`;
export const leasePk = (name: string) => `lease#${name}`;
export const nodeSyncLeasePk = leasePk('node-sync');
export const sweepLeasePk = leasePk('sweep');
/** The sweep item's attribute per orphaned owner UID. */
export const orphanAttribute = (uid: string) => `orphan#${uid}`;
export const hostSetMetaPk = 'hosts#meta';
export const hostChunkPk = (chunkKey: string, i: number) => `hosts#chunk#${chunkKey}#${i}`;
/** The registration budget's item (aws/registration-budget.ts books on it). */
export const registrationBudgetPk = 'budget#elbv2-registration';
/** The Describe* and change budgets' items (the same shape, aws/registration-budget.ts). */
export const describeBudgetPk = 'budget#elbv2-describe';
export const changeBudgetPk = 'budget#elbv2-change';
