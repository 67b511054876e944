import { needsCleanup, wantsLoadBalancer, type ClaimPolicy } from '../core/claim';
import { isBeingDeleted, type Service } from '../core/objects';
import type { ServiceRecord } from './ports';

/**
 * The Service and its record, when a partial sync (a host update, a targets sync) may run on
 * them; undefined when only the full sync can say what to do: the Service is gone, is not the
 * one recorded (a new UID), was never ensured, is no longer ours, or is being deleted.
 */
export function partialSyncSubject(
  service: Service | undefined,
  record: ServiceRecord | undefined,
  claim: ClaimPolicy,
): { service: Service; record: ServiceRecord } | undefined {
  if (
    service === undefined ||
    record === undefined ||
    record.uid !== (service.metadata?.uid ?? '') ||
    !wantsLoadBalancer(service, claim) ||
    needsCleanup(service, claim) ||
    isBeingDeleted(service)
  ) {
    return undefined;
  }
  return { service, record };
}
