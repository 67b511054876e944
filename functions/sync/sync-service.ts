import { checkpointFor } from '../core/checkpoint';
import {
  finalizerFor,
  hasFinalizer,
  needsCleanup,
  ourFinalizersOn,
  wantsLoadBalancer,
} from '../core/claim';
import {
  errorKind,
  errorMessage,
  NotFoundError,
  RequeueAfterError,
  TerminalError,
} from '../core/errors';
import { endpointsDigest, type EndpointSliceView } from '../core/endpoint-targets';
import { canonicalJson } from '../core/hash';
import type { ServiceHostSet } from '../core/hosts';
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
import { sameSnapshot, serviceSnapshot } from '../core/snapshot';
import { loadBalancerStatusEqual } from '../core/status';
import { type SyncDependencies } from './dependencies';
import { hostsForService } from './host-selection';
import { done, outcomeOf, requeueAfter, type SyncOutcome } from './outcome';
import { announce } from './announce';
import { refreshPodTargets } from './pod-targets';
import {
  awsUnchanged,
  keptByDeletionProtection,
  providerStateOf,
  type EnsureResult,
  type ProviderState,
  type ServiceRecord,
} from './ports';

/**
 * Syncs one Service key (S4, S7–S13, S19): re-reads the live Service, deletes what state records
 * when it is gone or was re-created with a new UID, then runs the delete or the ensure branch.
 * Returns how it ended; only invariant errors are thrown.
 */
export interface SyncServiceOptions {
  /** Run Ensure even on a checkpoint hit: the sweep's drift repair and forced resyncs. */
  readonly ignoreCheckpoint?: boolean;
  /**
   * The pass after one that failed or died (an unverified lease): what its Ensure changes is most
   * likely that pass's unfinished work (half the targets of a rolling update), not someone's
   * drift, so it is said as an Ensure (Normal) rather than as a repair (Warning).
   */
  readonly finishing?: boolean;
}

export async function syncService(
  key: ServiceKey,
  deps: SyncDependencies,
  options: SyncServiceOptions = {},
): Promise<SyncOutcome> {
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
  deps.lifecycle.subject(service);
  if (record !== undefined) await announceChanges(record.snapshot, service, deps);
  if (record !== undefined && record.uid !== (service.metadata?.uid ?? '')) {
    // S8: the same name with a new UID is a new Service; the old one's resources go first.
    const outcome = await deleteRecorded(record, deps);
    if (outcome.kind !== 'done') return outcome;
    record = undefined;
    // The rest of the pass, a failure included, is about the new Service.
    deps.lifecycle.subject(service);
  }
  const live = service;
  try {
    // A Service on its way out gets no new finalizer (the API server refuses one) and no new LB,
    // even when another controller's finalizer is what keeps it alive.
    const unwanted =
      !wantsLoadBalancer(live, deps.claim) ||
      needsCleanup(live, deps.claim) ||
      isBeingDeleted(live);
    return unwanted
      ? await deleteBranch(live, key, record, deps)
      : await ensureBranch(live, key, record, deps, options);
  } catch (error) {
    // Requeue-after is not a failure (docs/design.md §4): no Warning for it.
    if (!(error instanceof RequeueAfterError)) {
      await deps.events.record(serviceReference(live), events.syncFailed(errorMessage(error)));
    }
    return outcomeOf(error);
  }
}

/**
 * S3: the seed emitted a Normal event per changed field from its informer; the forwarder only
 * filters, so the sync tells the user what changed since the snapshot in state.
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
  deps.lifecycle.subject(snapshot);
  const emit = (event: ControllerEvent) => deps.events.record(serviceReference(snapshot), event);
  try {
    // Written only if the delete does not finish in this pass: a pass that completes removes the
    // record, and one that dies is re-run from the record as it was (docs/design.md §3).
    const pending = pendingRecord(record, deps, { deleting: true });
    if (!record.deleting) await emit(events.deleting);
    let result;
    try {
      result = await deps.provider.ensureLoadBalancerDeleted(snapshot, record.provider);
    } catch (error) {
      await keepFailedPass(await markedIfKept(pending, error, deps), error, deps);
      // Requeue-after is not a failure (docs/design.md §4): no Warning for it.
      if (!(error instanceof RequeueAfterError)) {
        await emit(events.deleteFailed(errorMessage(error)));
      }
      return outcomeOf(error);
    }
    if (result.requeueAfterSeconds !== undefined) {
      await deps.state.putService({ ...pending, provider: result.state });
      return requeueAfter(
        result.requeueAfterSeconds,
        'load balancer resources are still being deleted',
      );
    }
    await emit(events.deleted);
    if (record.kept === true) await deps.state.markKept(record.key, false);
    await deps.state.deleteService(record.key);
    announceDeleted(snapshot, record, result.loadBalancerId, deps);
    return done;
  } catch (error) {
    return outcomeOf(error);
  }
}

/** S9: the Service no longer wants an LB from us, or is being deleted. */
async function deleteBranch(
  service: Service,
  key: ServiceKey,
  record: ServiceRecord | undefined,
  deps: SyncDependencies,
): Promise<SyncOutcome> {
  // Both modes' finalizers, when claimClassless was switched while the Service was ours.
  const finalizers = ourFinalizersOn(service, deps.claim);
  // We write state before creating anything and add our finalizer first, so with neither there is
  // nothing of ours to find; the status, if any, was written by someone else. Orphans from lost
  // state are the sweep's job.
  if (record === undefined && finalizers.length === 0) return done;
  const ref = serviceReference(service);
  const { exists } = await deps.provider.getLoadBalancer(service, record?.provider);
  let deletedId: string | undefined;
  /** The record to keep if the pass fails after the load balancer is gone: it vouches for nothing. */
  let afterDelete: ServiceRecord | undefined;
  if (exists) {
    // The checkpoint is cleared (and the current spec kept) before AWS changes, so a flip back to
    // LoadBalancer after a failed delete cannot hit a checkpoint that describes a deleted NLB.
    // It is written when the pass fails or must come back; a completed delete removes the record.
    const pending = record && pendingRecord(record, deps, { deleting: true, snapshot: service });
    if (!record?.deleting) await deps.events.record(ref, events.deleting);
    let result;
    try {
      result = await deps.provider.ensureLoadBalancerDeleted(service, record?.provider);
    } catch (error) {
      if (pending !== undefined) {
        await keepFailedPass(await markedIfKept(pending, error, deps), error, deps);
      }
      throw error;
    }
    deletedId = result.loadBalancerId;
    afterDelete = pending && { ...pending, provider: result.state };
    if (result.requeueAfterSeconds !== undefined) {
      if (afterDelete !== undefined) await deps.state.putService(afterDelete);
      return requeueAfter(
        result.requeueAfterSeconds,
        'load balancer resources are still being deleted',
      );
    }
  }
  try {
    for (const finalizer of finalizers) await deps.kube.removeFinalizer(service, finalizer);
    await deps.events.record(ref, events.deleted);
    // The dead hostname must go even while another controller's finalizer keeps the Service
    // alive (external-dns and the like would keep publishing it). Only a Service that our
    // finalizers alone held is already gone, and a patch would find nothing.
    const heldByOthers = (service.metadata?.finalizers ?? []).some((f) => !finalizers.includes(f));
    if (!isBeingDeleted(service) || heldByOthers) await patchStatusIfChanged(service, {}, deps);
    if (record?.kept === true) await deps.state.markKept(key, false);
    if (record !== undefined) await deps.state.deleteService(key);
  } catch (error) {
    // The old checkpoint must not survive the load balancer it described.
    if (afterDelete !== undefined) await deps.state.putService(afterDelete).catch(() => undefined);
    throw error;
  }
  announceDeleted(service, record, deletedId, deps);
  return done;
}

/**
 * LoadBalancerDeleted, when there was a load balancer to speak of: one announced, or one this
 * delete found. A Service whose LB was never created (invalid from the start) has nothing to say.
 */
function announceDeleted(
  service: Service,
  record: ServiceRecord | undefined,
  deletedId: string | undefined,
  deps: SyncDependencies,
): void {
  if (record?.announced === undefined && deletedId === undefined) return;
  deps.lifecycle.deleted(service, deletedId ?? record?.announced?.loadBalancerId);
}

/** No hosts, and a hash that leaves them out of the checkpoint: for a Service whose targets are pods. */
const noHosts: ServiceHostSet = { hosts: [], hash: '' };

/**
 * The Service's targets: its nodes, or, when the provider targets pods, its EndpointSlices (one
 * list) and no nodes at all, so node changes neither re-run its Ensure nor select it for a host
 * update.
 */
async function targetsOf(
  service: Service,
  key: ServiceKey,
  record: ServiceRecord | undefined,
  deps: SyncDependencies,
): Promise<Targets> {
  if (!deps.provider.targetsFromEndpoints(service)) {
    return { hosts: await hostsForService(deps, service, record?.nodeSelector) };
  }
  const { namespace, name } = parseServiceKey(key);
  return { hosts: noHosts, slices: await deps.kube.listEndpointSlices(namespace, name) };
}

interface Targets {
  readonly hosts: ServiceHostSet;
  /** Present when the targets are pods. */
  readonly slices?: readonly EndpointSliceView[];
}

/** S10: make the LB match the Service, unless the checkpoint says it already does. */
async function ensureBranch(
  service: Service,
  key: ServiceKey,
  record: ServiceRecord | undefined,
  deps: SyncDependencies,
  options: SyncServiceOptions,
): Promise<SyncOutcome> {
  const targets = await targetsOf(service, key, record, deps);
  const { hosts } = targets;
  const inputs = { service, claim: deps.claim, providerFingerprint: deps.provider.fingerprint };
  const checkpoint = checkpointFor({ ...inputs, hostsHash: hosts.hash });
  // Terminal errors that depend on the nodes (too many targets) are re-driven by host updates.
  const spec = checkpointFor({ ...inputs, hostsHash: '' });
  if (options.ignoreCheckpoint && record?.warned?.spec === spec) {
    // A sweep over a spec already reported as wrong: nothing was fixed, so nothing is tried or said.
    return { kind: 'terminal', error: new TerminalError(record.warned.message), repeated: true };
  }
  try {
    validateLoadBalancerService(service, targets.slices === undefined ? 'nodes' : 'pods');
    if (record?.checkpoint === checkpoint) {
      if (options.ignoreCheckpoint)
        return await checkDrift(service, record, targets, deps, options.finishing === true);
      const outcome = await keepInSync(service, record, targets, deps);
      if (outcome !== 'ensure') return outcome;
      const current = (await deps.state.getService(key)) ?? record;
      return await ensure(service, key, current, targets, checkpoint, deps);
    }
    return await ensure(service, key, record, targets, checkpoint, deps);
  } catch (error) {
    if (errorKind(error) !== 'terminal') throw error;
    return await reportTerminal(service, key, spec, error as TerminalError, deps);
  }
}

/**
 * A checkpoint hit: the AWS side already matches, so no cloud call and no Ensuring/Ensured noise,
 * but the finalizer and status are ours to keep right. Pod targets are not in the checkpoint:
 * they follow the slices here, as a targets sync would (`ensure`: only a full Ensure can).
 */
async function keepInSync(
  service: Service,
  record: ServiceRecord,
  targets: Targets,
  deps: SyncDependencies,
): Promise<SyncOutcome | 'ensure'> {
  await addFinalizerIfMissing(service, deps);
  await patchStatusIfChanged(service, record.status ?? {}, deps);
  // A change that does not touch AWS (externalIPs, say) still updates the snapshot, so its event
  // is announced once.
  const snapshot = serviceSnapshot(service);
  let current = record;
  if (!sameSnapshot(record.snapshot, snapshot)) {
    current = { ...record, snapshot, updatedAt: deps.clock.now().toISOString() };
    await deps.state.putService(current);
  }
  if (targets.slices === undefined) return done;
  return await refreshPodTargets(service, current, targets.slices, deps, {});
}

/**
 * The sweep's drift check of an LB the checkpoint says is in sync: Ensure runs against AWS, but
 * says and writes nothing unless it had to repair something, then says what (docs/design.md §3).
 */
async function checkDrift(
  service: Service,
  record: ServiceRecord,
  targets: Targets,
  deps: SyncDependencies,
  finishing: boolean,
): Promise<SyncOutcome> {
  const { hosts, slices } = targets;
  const targetsHash = slices && endpointsDigest(slices);
  const ref = serviceReference(service);
  // Drift on the Service's side is repaired, and reported, like drift in AWS.
  const repairs: string[] = [];
  const finalizer = finalizerFor(deps.claim);
  if (!hasFinalizer(service, finalizer)) {
    await deps.kube.addFinalizer(service, finalizer);
    repairs.push(`add finalizer ${finalizer}`);
  }
  let pending: ServiceRecord | undefined;
  let result: EnsureResult;
  try {
    result = await deps.provider.ensureLoadBalancer(service, hosts.hosts, record.provider, {
      // The checkpoint is cleared before the repair, as before any AWS change.
      beforeChanges: async () => {
        pending = pendingRecord(record, deps, { snapshot: service });
        await deps.state.putService(pending);
      },
      endpointSlices: slices,
    });
  } catch (error) {
    if (pending !== undefined) await keepPartialProviderState(pending, error, deps);
    throw error;
  }
  if (pending === undefined) {
    // Nothing drifted. State changes only if the provider learned something (a renamed DNS
    // record, say) or the Service changed in ways AWS does not see.
    // A record from before the lifecycle feed existed takes its baseline here, silently.
    const snapshot = serviceSnapshot(service);
    if (
      canonicalJson(result.state) !== canonicalJson(record.provider) ||
      !loadBalancerStatusEqual(record.status, result.status) ||
      !sameSnapshot(record.snapshot, snapshot) ||
      record.announced === undefined ||
      record.targetsHash !== targetsHash
    ) {
      await deps.state.putService({
        ...record,
        snapshot,
        targetsHash,
        provider: result.state,
        status: result.status,
        announced:
          record.announced ??
          announce(service, undefined, result, deps.lifecycle, { silent: true }),
        updatedAt: deps.clock.now().toISOString(),
      });
    }
    if (!loadBalancerStatusEqual(service.status?.loadBalancer, result.status)) {
      await patchStatusIfChanged(service, result.status, deps);
      repairs.push('restore status.loadBalancer');
    }
    if (repairs.length > 0) await deps.events.record(ref, events.repaired(repairs));
    return result.requeueAfterSeconds !== undefined
      ? requeueAfter(
          result.requeueAfterSeconds,
          result.requeueReason ?? 'load balancer is still provisioning',
        )
      : done;
  }
  await deps.events.record(
    ref,
    finishing ? events.ensured : events.repaired([...repairs, ...result.changes]),
  );
  return await completeEnsure(service, record, pending, result, targets, record.checkpoint, deps);
}

/** A full Ensure: the spec, the hosts or the configuration changed since the last one. */
async function ensure(
  service: Service,
  key: ServiceKey,
  record: ServiceRecord | undefined,
  targets: Targets,
  checkpoint: string,
  deps: SyncDependencies,
): Promise<SyncOutcome> {
  const { hosts } = targets;
  const ref = serviceReference(service);
  await deps.events.record(ref, events.ensuring);
  // Before anything is created, so a deletion cannot slip past us.
  await addFinalizerIfMissing(service, deps);
  if (hosts.hosts.length === 0 && targets.slices === undefined)
    await deps.events.record(ref, events.unavailable);
  // A new Service's record is stored before the first AWS change (S7), so its deletion finds
  // it. A known Service's is written once, after the provider: a pass that fails stores the
  // snapshot with the checkpoint cleared (keepFailedPass), and one that dies leaves its lease to
  // expire, which makes the next holder check AWS instead of trusting the checkpoint
  // (`unverified` on the lease item, docs/design.md §3).
  const pending: ServiceRecord = {
    key,
    uid: service.metadata?.uid ?? '',
    snapshot: serviceSnapshot(service),
    provider: record?.provider ?? {},
    status: record?.status,
    hostsHash: record?.hostsHash,
    nodeSelector: record?.nodeSelector,
    // Whatever the pass leaves registered, the next targets sync looks again.
    targetsHash: undefined,
    announced: record?.announced,
    warned: record?.warned,
    // Still counted as kept until the record goes (a kept NLB wanted again is the same NLB).
    kept: record?.kept,
    updatedAt: deps.clock.now().toISOString(),
  };
  if (record === undefined) await deps.state.putService(pending);
  // Nothing is written before AWS for a known Service, so a spec its record cannot hold is refused
  // here, before the provider applies it.
  else deps.state.checkStorable(pending);
  let result;
  try {
    result = await deps.provider.ensureLoadBalancer(service, hosts.hosts, pending.provider, {
      endpointSlices: targets.slices,
    });
  } catch (error) {
    if (record === undefined) await keepPartialProviderState(pending, error, deps);
    else await keepFailedPass(pending, error, deps);
    throw error;
  }
  const outcome = await completeEnsure(service, record, pending, result, targets, checkpoint, deps);
  if (result.requeueAfterSeconds === undefined) await deps.events.record(ref, events.ensured);
  return outcome;
}

/**
 * After the provider is done: announce what changed, store the result with the checkpoint (unless
 * the NLB is still provisioning), warn when the address changed, and write the status.
 */
async function completeEnsure(
  service: Service,
  record: ServiceRecord | undefined,
  pending: ServiceRecord,
  result: EnsureResult,
  targets: Targets,
  checkpoint: string | undefined,
  deps: SyncDependencies,
): Promise<SyncOutcome> {
  const { hosts, slices } = targets;
  const provisioning = result.requeueAfterSeconds !== undefined;
  // Announced once the provider is done (not while it asks to come back), and then only what
  // changed since the last announcement. A record from before the feed existed, whose Ensure had
  // completed, sets the baseline silently.
  const announced = provisioning
    ? record?.announced
    : announce(service, record?.announced, result, deps.lifecycle, {
        silent: record !== undefined && record.announced === undefined && !!record.checkpoint,
      });
  await deps.state.putService({
    ...pending,
    provider: result.state,
    status: result.status,
    checkpoint: provisioning ? undefined : checkpoint,
    // Pod targets: node sync passes the Service by (no host hash), and the targets sync compares
    // the slices with those this Ensure registered.
    hostsHash: slices === undefined ? hosts.hash : undefined,
    nodeSelector: hosts.nodeSelector,
    targetsHash: slices && endpointsDigest(slices),
    announced,
    warned: undefined,
    updatedAt: deps.clock.now().toISOString(),
  });
  // The LB vanished (deleted by hand, say) and was created again, or was replaced: whatever
  // points at the old name (DNS records, allow-lists) is now wrong, so the user is told (S17).
  const before = record?.status?.ingress?.[0]?.hostname;
  const after = result.status.ingress?.[0]?.hostname;
  if (before !== undefined && after !== undefined && before !== after) {
    await deps.events.record(serviceReference(service), events.recreated(before, after));
  }
  await patchStatusIfChanged(service, result.status, deps);
  if (result.requeueAfterSeconds !== undefined) {
    return requeueAfter(
      result.requeueAfterSeconds,
      result.requeueReason ?? 'load balancer is still provisioning',
    );
  }
  return done;
}

/**
 * S11 for a spec that cannot be served: one Warning per spec (its fingerprint), kept in state
 * where there is a record, so neither a sweep nor a repeat of the same message says it twice.
 */
async function reportTerminal(
  service: Service,
  key: ServiceKey,
  spec: string,
  error: TerminalError,
  deps: SyncDependencies,
): Promise<SyncOutcome> {
  // Re-read: the pass may have stored a pending record before AWS refused.
  const current = await deps.state.getService(key);
  if (current?.warned?.spec === spec) return { kind: 'terminal', error, repeated: true };
  const message = errorMessage(error);
  await deps.events.record(serviceReference(service), events.syncFailed(message));
  if (current !== undefined) {
    // The snapshot follows, so the field-change events (S3) for this spec are not repeated
    // either. The checkpoint goes: a pass that failed does not vouch for the load balancer.
    const warned: ServiceRecord = {
      ...current,
      snapshot: serviceSnapshot(service),
      checkpoint: undefined,
      warned: { spec, message },
      updatedAt: deps.clock.now().toISOString(),
    };
    try {
      await deps.state.putService(warned);
    } catch (storeError) {
      if (errorKind(storeError) !== 'terminal') throw storeError;
      // The new spec is what does not fit: the warning is kept with the snapshot it had.
      await deps.state.putService({ ...warned, snapshot: current.snapshot });
    }
  }
  return { kind: 'terminal', error };
}

/** S10, S13: our finalizer, added only when it is not there yet. */
async function addFinalizerIfMissing(service: Service, deps: SyncDependencies): Promise<void> {
  const finalizer = finalizerFor(deps.claim);
  if (!hasFinalizer(service, finalizer)) await deps.kube.addFinalizer(service, finalizer);
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

/**
 * A provider that fails half-way reports what it had already created (ARNs) on the error, so the
 * next pass and the deletion path can find it even if tags are slow to show up.
 */
async function keepPartialProviderState(
  pending: ServiceRecord,
  error: unknown,
  deps: SyncDependencies,
): Promise<void> {
  const partial: ProviderState | undefined = providerStateOf(error);
  if (partial !== undefined) await deps.state.putService({ ...pending, provider: partial });
}

/**
 * A pass that failed after the provider may have changed AWS: its snapshot is kept with the
 * checkpoint cleared (and what the provider had created), so a spec flipped back to the last one
 * applied is not taken for in sync.
 */
/**
 * A delete deletion protection refused keeps the NLB with no Service that wants it: it is marked
 * on its namespace's kept item, so `maxLoadBalancerServices` counts it even when the tenant strips
 * our finalizer or the Service is gone (issue 32, finding 2). Marked once; the mark goes with the
 * record.
 */
async function markedIfKept(
  pending: ServiceRecord,
  error: unknown,
  deps: SyncDependencies,
): Promise<ServiceRecord> {
  if (!keptByDeletionProtection(error) || pending.kept === true) return pending;
  await deps.state.markKept(pending.key, true);
  return { ...pending, kept: true };
}

async function keepFailedPass(
  pending: ServiceRecord,
  error: unknown,
  deps: SyncDependencies,
): Promise<void> {
  // Nothing changed in AWS: the record as stored still says what is there.
  if (awsUnchanged(error)) return;
  await deps.state.putService({ ...pending, provider: providerStateOf(error) ?? pending.provider });
}

function pendingRecord(
  record: ServiceRecord,
  deps: SyncDependencies,
  changes: { deleting?: boolean; snapshot?: Service } = {},
): ServiceRecord {
  return {
    ...record,
    ...(changes.snapshot ? { snapshot: serviceSnapshot(changes.snapshot) } : {}),
    // A load balancer on its way out (or kept by deletion protection, with no targets) has no
    // hosts to keep in step: node sync passes it by.
    ...(changes.deleting ? { deleting: true, hostsHash: undefined } : {}),
    checkpoint: undefined,
    updatedAt: deps.clock.now().toISOString(),
  };
}
