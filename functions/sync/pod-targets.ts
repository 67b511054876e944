import { checkpointFor } from '../core/checkpoint';
import { endpointsDigest, type EndpointSliceView } from '../core/endpoint-targets';
import { errorKind, errorMessage, InvariantError, NotFoundError } from '../core/errors';
import { events } from '../core/events';
import { serviceReference, type Service } from '../core/objects';
import type { SyncDependencies } from './dependencies';
import { done, outcomeOf, type SyncOutcome } from './outcome';
import { providerStateOf, type ServiceRecord, type UpdateOptions } from './ports';

// Pod targets (issue 36): what the targets sync and the service sync share.

/**
 * The checkpoint of a Service whose targets are pods: its spec alone, since nodes do not
 * concern it (its endpoints are compared by `targetsHash` instead).
 */
export function podTargetsCheckpoint(service: Service, deps: SyncDependencies): string {
  return checkpointFor({
    service,
    claim: deps.claim,
    providerFingerprint: deps.provider.fingerprint,
    hostsHash: '',
  });
}

/**
 * The targets step of a Service in sync otherwise: nothing when the slices are those the targets
 * last came from; else the provider's targets update, whose progress is recorded even when it
 * fails half-way (removals go first, so a retry does not repeat them). `ensure`: what is recorded
 * does not fit the Service, and only a full Ensure can tell what to do.
 */
export async function refreshPodTargets(
  service: Service,
  record: ServiceRecord,
  slices: readonly EndpointSliceView[],
  deps: SyncDependencies,
  options: UpdateOptions,
): Promise<SyncOutcome | 'ensure'> {
  const digest = endpointsDigest(slices);
  if (record.targetsHash === digest && options.readTargets !== true) return done;
  const store = (changes: Partial<ServiceRecord>) =>
    deps.state.putService({ ...record, ...changes, updatedAt: deps.clock.now().toISOString() });
  let result;
  try {
    result = await deps.provider.updateEndpointTargets(service, slices, record.provider, options);
  } catch (error) {
    if (error instanceof InvariantError) throw error;
    const provider = providerStateOf(error) ?? record.provider;
    if (error instanceof NotFoundError) {
      // A target group recorded for a port is gone, or none is recorded for it: a full Ensure
      // repairs that (and reads the slices itself), which the caller runs.
      await store({ provider, checkpoint: undefined, targetsHash: undefined });
      return 'ensure';
    }
    // The digest goes with a failed pass, so the next one diffs again; a terminal one (more pods
    // than a target group holds) keeps it, so the same endpoints are not warned about twice.
    await store({
      provider,
      targetsHash: errorKind(error) === 'terminal' ? digest : undefined,
    });
    // The budget booked ahead is no failure: the key comes back when its slot is due.
    if (errorKind(error) !== 'requeue-after') {
      await deps.events.record(serviceReference(service), events.syncFailed(errorMessage(error)));
    }
    return outcomeOf(error);
  }
  await store({ provider: result.state, targetsHash: digest });
  return done;
}
