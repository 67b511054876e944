import { checkpointFor } from '../core/checkpoint';
import { finalizerFor, hasFinalizer, needsCleanup, wantsLoadBalancer } from '../core/claim';
import { errorMessage, NotFoundError } from '../core/errors';
import { events, type ControllerEvent } from '../core/events';
import { parseServiceKey, type ServiceKey } from '../core/keys';
import { needsUpdate } from '../core/needs-update';
import {
  isBeingDeleted,
  serviceReference,
  type LoadBalancerStatus,
  type Service,
} from '../core/objects';
import { validateLoadBalancerService } from '../core/service-validation';
import { serviceSnapshot } from '../core/snapshot';
import { loadBalancerStatusEqual } from '../core/status';
import { currentEligibleHosts, type SyncDependencies } from './dependencies';
import { done, outcomeOf, requeueAfter, type SyncOutcome } from './outcome';
import type { ServiceRecord } from './ports';

/**
 * Syncs one Service key (S4, S7–S13, S19): re-reads the live Service, deletes what state records
 * when it is gone or was re-created with a new UID, then runs the delete or the ensure branch.
 */
export async function syncService(key: ServiceKey, deps: SyncDependencies): Promise<SyncOutcome> {
  let service: Service | undefined;
  let record: ServiceRecord | undefined;
  try {
    const { namespace, name } = parseServiceKey(key);
    service = await deps.kube.getService(namespace, name);
    record = await deps.state.getService(key);
  } catch (error) {
    return outcomeOf(error);
  }
  if (service === undefined) return deleteRecorded(record, deps);
  if (record !== undefined) await announceChanges(record.snapshot, service, deps);
  if (record !== undefined && record.uid !== (service.metadata?.uid ?? '')) {
    // S8: the same name with a new UID is a new Service; the old one's resources go first.
    const outcome = await deleteRecorded(record, deps);
    if (outcome.kind !== 'done') return outcome;
    record = undefined;
  }
  const live = service;
  try {
    if (!wantsLoadBalancer(live, deps.claim) || needsCleanup(live, deps.claim)) {
      return await deleteBranch(live, key, record, deps);
    }
    return await ensureBranch(live, key, record, deps);
  } catch (error) {
    await deps.events.record(serviceReference(live), events.syncFailed(errorMessage(error)));
    return outcomeOf(error);
  }
}

/**
 * S3: the seed emitted a Normal event per changed field from its informer; the forwarder only
 * filters, so the sync tells the user what changed since the snapshot of the last Ensure.
 */
async function announceChanges(
  snapshot: Service,
  live: Service,
  deps: SyncDependencies,
): Promise<void> {
  for (const change of needsUpdate(snapshot, live, deps.claim)) {
    if (change.event !== undefined) await deps.events.record(serviceReference(live), change.event);
  }
}

/** S7: the Service is gone (or replaced): delete what state recorded for it, then forget the key. */
async function deleteRecorded(
  record: ServiceRecord | undefined,
  deps: SyncDependencies,
): Promise<SyncOutcome> {
  if (record === undefined) return done;
  const snapshot = record.snapshot;
  const emit = (event: ControllerEvent) => deps.events.record(serviceReference(snapshot), event);
  await emit(events.deleting);
  try {
    const result = await deps.provider.ensureLoadBalancerDeleted(snapshot, record.provider);
    if (result.requeueAfterSeconds !== undefined) {
      await deps.state.putService(pendingRecord(record, result.state, deps));
      return requeueAfter(
        result.requeueAfterSeconds,
        'load balancer resources are still being deleted',
      );
    }
  } catch (error) {
    await emit(events.deleteFailed(errorMessage(error)));
    return outcomeOf(error);
  }
  await emit(events.deleted);
  await deps.state.deleteService(record.key);
  return done;
}

/** S9: the Service no longer wants an LB from us, or is being deleted. */
async function deleteBranch(
  service: Service,
  key: ServiceKey,
  record: ServiceRecord | undefined,
  deps: SyncDependencies,
): Promise<SyncOutcome> {
  const finalizer = finalizerFor(deps.claim);
  const finalized = hasFinalizer(service, finalizer);
  const hasStatus = !loadBalancerStatusEqual(service.status?.loadBalancer, {});
  // We write state before creating anything and add the finalizer first, so with neither there is
  // nothing of ours to find. Orphans from lost state are the sweep's job, not every sync's.
  if (record === undefined && !finalized && !hasStatus) return done;
  const ref = serviceReference(service);
  if (record !== undefined || finalized) {
    const { exists } = await deps.provider.getLoadBalancer(service, record?.provider);
    if (exists) {
      await deps.events.record(ref, events.deleting);
      const result = await deps.provider.ensureLoadBalancerDeleted(service, record?.provider);
      if (record !== undefined) {
        await deps.state.putService(pendingRecord(record, result.state, deps));
      }
      if (result.requeueAfterSeconds !== undefined) {
        return requeueAfter(
          result.requeueAfterSeconds,
          'load balancer resources are still being deleted',
        );
      }
    }
  }
  if (finalized) await deps.kube.removeFinalizer(service, finalizer);
  await deps.events.record(ref, events.deleted);
  // A Service on its way out has nothing to show; patching it would only race its removal.
  if (!isBeingDeleted(service)) await patchStatusIfChanged(service, {}, deps);
  if (record !== undefined) await deps.state.deleteService(key);
  return done;
}

/** S10: make the LB match the Service, unless the checkpoint says it already does. */
async function ensureBranch(
  service: Service,
  key: ServiceKey,
  record: ServiceRecord | undefined,
  deps: SyncDependencies,
): Promise<SyncOutcome> {
  validateLoadBalancerService(service);
  const finalizer = finalizerFor(deps.claim);
  const hosts = await currentEligibleHosts(deps);
  const checkpoint = checkpointFor({
    service,
    hostsHash: hosts.hash,
    claim: deps.claim,
    providerFingerprint: deps.provider.fingerprint,
  });
  if (record?.checkpoint === checkpoint) {
    // The AWS side already matches: no cloud call, no Ensuring/Ensured noise, but the finalizer
    // and status are ours to keep right.
    if (!hasFinalizer(service, finalizer)) await deps.kube.addFinalizer(service, finalizer);
    await patchStatusIfChanged(service, record.status ?? {}, deps);
    return done;
  }
  const ref = serviceReference(service);
  await deps.events.record(ref, events.ensuring);
  // Before anything is created, so a deletion cannot slip past us.
  if (!hasFinalizer(service, finalizer)) await deps.kube.addFinalizer(service, finalizer);
  if (hosts.hosts.length === 0) await deps.events.record(ref, events.unavailable);
  // The snapshot is stored and the checkpoint cleared before the first AWS change (S7).
  const pending: ServiceRecord = {
    key,
    uid: service.metadata?.uid ?? '',
    snapshot: serviceSnapshot(service),
    provider: record?.provider ?? {},
    status: record?.status,
    hostsHash: record?.hostsHash,
    updatedAt: deps.clock.now().toISOString(),
  };
  await deps.state.putService(pending);
  const result = await deps.provider.ensureLoadBalancer(service, hosts.hosts, pending.provider);
  const provisioning = result.requeueAfterSeconds !== undefined;
  await deps.state.putService({
    ...pending,
    provider: result.state,
    status: result.status,
    checkpoint: provisioning ? undefined : checkpoint,
    hostsHash: hosts.hash,
    updatedAt: deps.clock.now().toISOString(),
  });
  if (!provisioning) await deps.events.record(ref, events.ensured);
  await patchStatusIfChanged(service, result.status, deps);
  if (result.requeueAfterSeconds !== undefined) {
    return requeueAfter(result.requeueAfterSeconds, 'load balancer is still provisioning');
  }
  return done;
}

/** S12: only when status.loadBalancer changes; a Service gone meanwhile is not an error. */
async function patchStatusIfChanged(
  service: Service,
  desired: LoadBalancerStatus,
  deps: SyncDependencies,
): Promise<void> {
  if (loadBalancerStatusEqual(service.status?.loadBalancer, desired)) return;
  try {
    await deps.kube.patchServiceStatus(service, desired);
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
  }
}

function pendingRecord(
  record: ServiceRecord,
  provider: ServiceRecord['provider'],
  deps: SyncDependencies,
): ServiceRecord {
  return { ...record, provider, checkpoint: undefined, updatedAt: deps.clock.now().toISOString() };
}
