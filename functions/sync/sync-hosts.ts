import { checkpointFor } from '../core/checkpoint';
import { errorKind, errorMessage, InvariantError, NotFoundError } from '../core/errors';
import { events } from '../core/events';
import { parseServiceKey, type ServiceKey } from '../core/keys';
import { serviceReference } from '../core/objects';
import { type SyncDependencies } from './dependencies';
import { hostsForService } from './host-selection';
import type { EligibleHosts } from '../core/node-sync-plan';
import { done, outcomeOf, type SyncOutcome } from './outcome';
import { announce } from './announce';
import { providerStateOf, type UpdateOptions, type UpdateResult } from './ports';
import { partialSyncSubject } from './partial-sync';
import { syncService } from './sync-service';

/**
 * Brings one Service's LB targets in line with the eligible host set that node sync stored (S16,
 * S17). The message carries only the key: hosts and Service are read fresh. Anything that is not
 * a plain host update (the Service is gone, no longer ours, being deleted, never ensured, or its
 * LB has vanished) is handed to syncService, which owns those paths.
 */
export async function syncHosts(
  key: ServiceKey,
  deps: SyncDependencies,
  options: UpdateOptions & {
    /**
     * The eligible hosts as node sync has just worked them out (its direct host updates), so
     * the pass need not read them back from the table (issue 37: one node change, one hop).
     */
    readonly eligible?: EligibleHosts | undefined;
  } = {},
): Promise<SyncOutcome> {
  try {
    const { namespace, name } = parseServiceKey(key);
    // Independent reads, at once: the live Service and what the last pass recorded.
    const [live, recorded] = await Promise.all([
      deps.kube.getService(namespace, name),
      deps.state.getService(key),
    ]);
    const subject = partialSyncSubject(live, recorded, deps.claim);
    if (subject === undefined) return await syncService(key, deps);
    const { service, record } = subject;
    // Pods are its targets and no node group is left to update (a `hosts` message from before
    // it switched, say): nodes are none of its business, and nothing is read or said.
    if (deps.provider.targetsFromEndpoints(service) && record.hostsHash === undefined) return done;
    deps.lifecycle.subject(service);
    const hosts = await hostsForService(deps, service, record.nodeSelector, options.eligible);
    // The record's hash says what the last clean pass registered; with targets to be read from
    // AWS, it proves nothing (a half-done update may have left more or fewer).
    if (record.hostsHash === hosts.hash && options.readTargets !== true) return done;

    const ref = serviceReference(service);
    const checkpointInput = {
      service,
      claim: deps.claim,
      providerFingerprint: deps.provider.fingerprint,
    };
    let result: UpdateResult;
    try {
      result = await deps.provider.updateLoadBalancer(service, hosts.hosts, record.provider, {
        ...(options.readTargets !== undefined ? { readTargets: options.readTargets } : {}),
      });
    } catch (error) {
      if (error instanceof InvariantError) throw error;
      if (errorKind(error) === 'requeue-after') {
        // The registration budget is booked ahead: not a failure and not drift. Keep what was
        // already changed (removals go first), so the next pass does not repeat it.
        const partial = providerStateOf(error);
        if (partial !== undefined && JSON.stringify(partial) !== JSON.stringify(record.provider)) {
          await deps.state.putService({
            ...record,
            provider: partial,
            checkpoint: undefined,
            updatedAt: deps.clock.now().toISOString(),
          });
        }
        return outcomeOf(error);
      }
      // S17: a failed update of an LB that no longer exists, or lost a target group, is not an
      // error. Drift like that is repaired by a full Ensure, so the record is marked stale and
      // the service sync takes over (it warns when the recreated LB has a new DNS name).
      const missing =
        error instanceof NotFoundError ||
        !(await deps.provider.getLoadBalancer(service, record.provider).then(
          (found) => found.exists,
          () => true,
        ));
      if (missing) {
        await deps.state.putService({
          ...record,
          checkpoint: undefined,
          hostsHash: undefined,
          updatedAt: deps.clock.now().toISOString(),
        });
        return await syncService(key, deps);
      }
      const names = hosts.hosts.map((host) => host.name);
      await deps.events.record(ref, events.updateFailed(names, errorMessage(error)));
      if (errorKind(error) === 'terminal') {
        // Warn once: note the attempt, so node sync stops selecting the Service for this host
        // set, and clear the checkpoint so the next service sync reconciles in full.
        await deps.state.putService({
          ...record,
          hostsHash: hosts.hash,
          nodeSelector: hosts.nodeSelector,
          checkpoint: undefined,
          updatedAt: deps.clock.now().toISOString(),
        });
      }
      return outcomeOf(error);
    }

    // Keep the checkpoint valid when it described the LB with its old hosts, so the next service
    // sync still hits it; otherwise leave it cleared.
    const wasCurrent =
      record.hostsHash !== undefined &&
      record.checkpoint === checkpointFor({ ...checkpointInput, hostsHash: record.hostsHash });
    // A record from before the feed existed sets the baseline silently.
    const announced = announce(service, record.announced, result, deps.lifecycle, {
      silent: record.announced === undefined,
    });
    // The Event says what AWS now has, whether or not the record is written: side by side.
    await Promise.all([
      deps.state.putService({
        ...record,
        provider: result.state,
        announced,
        hostsHash: hosts.hash,
        nodeSelector: hosts.nodeSelector,
        checkpoint: wasCurrent
          ? checkpointFor({ ...checkpointInput, hostsHash: hosts.hash })
          : undefined,
        updatedAt: deps.clock.now().toISOString(),
      }),
      deps.events.record(ref, hosts.hosts.length === 0 ? events.unavailable : events.updated),
    ]);
    return done;
  } catch (error) {
    return outcomeOf(error);
  }
}
