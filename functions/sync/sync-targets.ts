import { parseServiceKey, type ServiceKey } from '../core/keys';
import type { SyncDependencies } from './dependencies';
import { outcomeOf, type SyncOutcome } from './outcome';
import { partialSyncSubject } from './partial-sync';
import { podTargetsCheckpoint, refreshPodTargets } from './pod-targets';
import type { UpdateOptions } from './ports';
import { syncService } from './sync-service';

/**
 * Brings the pod targets of a Service whose NLB targets pods (`nlb-target-type: ip`) in line with
 * its EndpointSlices (issue 36). The message carries only the key: the Service, its record and
 * its slices are read fresh, so a message that arrives late or twice registers nothing stale.
 * Anything that is not a plain targets change (the Service is gone, not ours, being deleted, in
 * instance mode, or changed since its last Ensure) is handed to syncService, which covers it.
 */
export async function syncTargets(
  key: ServiceKey,
  deps: SyncDependencies,
  options: UpdateOptions = {},
): Promise<SyncOutcome> {
  try {
    const { namespace, name } = parseServiceKey(key);
    const subject = partialSyncSubject(
      await deps.kube.getService(namespace, name),
      await deps.state.getService(key),
      deps.claim,
    );
    const spec = subject && podTargetsCheckpoint(subject.service, deps);
    if (
      subject === undefined ||
      !deps.provider.targetsFromEndpoints(subject.service) ||
      // The spec changed since the last Ensure (or that one did not complete): a full sync,
      // which reads the slices too, is due anyway. Not for a spec already refused (warned),
      // which that sync would only refuse again: its pods are followed all the same.
      (subject.record.checkpoint !== spec && subject.record.warned?.spec !== spec)
    ) {
      return await syncService(key, deps);
    }
    const { service, record } = subject;
    deps.lifecycle.subject(service);
    const slices = await deps.kube.listEndpointSlices(namespace, name);
    const outcome = await refreshPodTargets(service, record, slices, deps, options);
    return outcome === 'ensure' ? await syncService(key, deps) : outcome;
  } catch (error) {
    return outcomeOf(error);
  }
}
