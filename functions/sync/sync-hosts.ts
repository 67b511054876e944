import { checkpointFor } from '../core/checkpoint';
import { needsCleanup, wantsLoadBalancer } from '../core/claim';
import { errorMessage, InvariantError } from '../core/errors';
import { events } from '../core/events';
import { parseServiceKey, type ServiceKey } from '../core/keys';
import { serviceReference, type Service } from '../core/objects';
import { currentEligibleHosts, type SyncDependencies } from './dependencies';
import { done, outcomeOf, type SyncOutcome } from './outcome';

/**
 * Brings one Service's LB targets in line with the eligible host set that node sync stored (S16,
 * S17). The message carries only the key: hosts and Service are read fresh. Services that are not
 * ours, or that the service sync has not ensured yet, are left to the service sync.
 */
export async function syncHosts(key: ServiceKey, deps: SyncDependencies): Promise<SyncOutcome> {
  let service: Service | undefined;
  try {
    const { namespace, name } = parseServiceKey(key);
    service = await deps.kube.getService(namespace, name);
    if (service === undefined) return done;
    if (!wantsLoadBalancer(service, deps.claim) || needsCleanup(service, deps.claim)) return done;
    const record = await deps.state.getService(key);
    if (record === undefined || record.uid !== (service.metadata?.uid ?? '')) return done;
    const hosts = await currentEligibleHosts(deps);
    if (record.hostsHash === hosts.hash) return done;

    const ref = serviceReference(service);
    let state = record.provider;
    try {
      ({ state } = await deps.provider.updateLoadBalancer(service, hosts.hosts, record.provider));
    } catch (error) {
      if (error instanceof InvariantError) throw error;
      // S17: a failed update of an LB that no longer exists is not an error.
      const exists = await deps.provider.getLoadBalancer(service, record.provider).then(
        (found) => found.exists,
        () => true,
      );
      if (!exists) return done;
      const names = hosts.hosts.map((host) => host.name);
      await deps.events.record(ref, events.updateFailed(names, errorMessage(error)));
      return outcomeOf(error);
    }

    // Keep the checkpoint valid when it described the LB with its old hosts, so the next service
    // sync still hits it; otherwise leave it cleared.
    const checkpointInput = {
      service,
      claim: deps.claim,
      providerFingerprint: deps.provider.fingerprint,
    };
    const wasCurrent =
      record.hostsHash !== undefined &&
      record.checkpoint === checkpointFor({ ...checkpointInput, hostsHash: record.hostsHash });
    await deps.state.putService({
      ...record,
      provider: state,
      hostsHash: hosts.hash,
      checkpoint: wasCurrent
        ? checkpointFor({ ...checkpointInput, hostsHash: hosts.hash })
        : undefined,
      updatedAt: deps.clock.now().toISOString(),
    });
    await deps.events.record(ref, hosts.hosts.length === 0 ? events.unavailable : events.updated);
    return done;
  } catch (error) {
    return outcomeOf(error);
  }
}
