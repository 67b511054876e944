import type { EndpointSliceView } from '../core/endpoint-targets';
import { NotFoundError, TerminalError } from '../core/errors';
import type { Service } from '../core/objects';
import type { ProviderState, UpdateOptions, UpdateResult } from '../sync/ports';
import { limits, tooManyPods } from './model/desired';
import { servingPodIds } from './model/pod-targets';
import { readNlbState, toProviderState } from './nlb-state';
import type { ProviderContext } from './provider-context';
import {
  applyTargetChanges,
  requireOwnedTargetGroups,
  type RecordedTargetGroup,
} from './update-targets';

// The provider's targets update for pod targets (issue 36): the recorded pod target groups
// brought to the Service's ready endpoints, with nothing read from AWS but their ownership tags.

/**
 * Endpoint changes only, in the pod target groups recorded, each keyed by its listener port.
 * Like a host update, it works from the Service's ports alone, not from the whole model, so pods
 * keep being followed while a spec the controller refuses waits to be fixed: a pod that is gone
 * must not stay a target (its address may be another pod's next). More ready pods than a group
 * holds: the first ones (by address) are kept, and a TerminalError says so once the rest is done.
 * A port of the Service that has no pod group recorded (it just switched to pods, or added the
 * port) is a NotFoundError, after the groups that are recorded were updated: a full Ensure
 * creates it.
 */
export async function updateEndpointTargets(
  ctx: ProviderContext,
  service: Service,
  slices: readonly EndpointSliceView[],
  state: ProviderState | undefined,
  options: UpdateOptions,
): Promise<UpdateResult> {
  const nlbState = readNlbState(state);
  const withState = () => ({ providerState: toProviderState(nlbState) });
  const recorded = Object.entries(nlbState.targetGroups ?? {}).filter(
    ([, tg]) => tg.targetType === 'ip',
  );
  const listeners = listenersOf(service);
  const wanted: { tg: RecordedTargetGroup; wanted: readonly string[] }[] = [];
  const tooMany: string[] = [];
  for (const [key, tg] of recorded) {
    const protocol = listeners.get(Number(key));
    // A port the spec no longer has: its group goes with the next full Ensure.
    if (protocol === undefined) continue;
    const pods = servingPodIds(service, Number(key), protocol, slices);
    if (pods.length > limits.targetsPerTargetGroup)
      tooMany.push(tooManyPods(Number(key), pods.length));
    if (options.readTargets === true) delete tg.targets;
    wanted.push({ tg, wanted: pods.slice(0, limits.targetsPerTargetGroup) });
  }
  const missing = [...listeners.keys()].filter(
    (port) => !recorded.some(([key]) => key === String(port)),
  );
  if (wanted.length > 0) {
    await applyTargetChanges(ctx, nlbState, wanted, () =>
      requireOwnedTargetGroups(
        ctx,
        service,
        nlbState,
        wanted.map((w) => w.tg),
      ),
    );
  }
  if (missing.length > 0) {
    throw Object.assign(
      new NotFoundError(
        `update targets: no pod target group is recorded for port ${missing.join(', ')}`,
      ),
      withState(),
    );
  }
  if (tooMany.length > 0) throw Object.assign(new TerminalError(tooMany.join('; ')), withState());
  return { state: toProviderState(nlbState), instances: [] };
}

/**
 * The Service's listeners by port, as lb-ports.ts merges them (TCP and UDP on one port are one
 * TCP_UDP listener), from the ports alone: no other check of the spec.
 */
function listenersOf(service: Service): Map<number, 'TCP' | 'UDP' | 'TCP_UDP'> {
  const listeners = new Map<number, 'TCP' | 'UDP' | 'TCP_UDP'>();
  for (const port of service.spec?.ports ?? []) {
    const protocol = port.protocol ?? 'TCP';
    if (protocol !== 'TCP' && protocol !== 'UDP') continue;
    const found = listeners.get(port.port);
    listeners.set(port.port, found === undefined || found === protocol ? protocol : 'TCP_UDP');
  }
  return listeners;
}
