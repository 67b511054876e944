import type { EndpointSliceView } from '../core/endpoint-targets';
import { NotFoundError } from '../core/errors';
import type { Service } from '../core/objects';
import type { ProviderState, UpdateOptions, UpdateResult } from '../sync/ports';
import { parseAnnotations } from './model/annotations';
import { buildDesiredLoadBalancer } from './model/desired';
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
 * Endpoint changes only. The pods each target group should hold come from the same model an
 * Ensure builds (so the two never disagree on ports, named ports or limits), with the Service's
 * recorded subnets standing in for a lookup: only the targets are used. A port whose pod target
 * group is not recorded (the Service has just switched to pods, or added a port) is a NotFoundError:
 * a full Ensure creates it.
 */
export async function updateEndpointTargets(
  ctx: ProviderContext,
  service: Service,
  slices: readonly EndpointSliceView[],
  state: ProviderState | undefined,
  options: UpdateOptions,
): Promise<UpdateResult> {
  const nlbState = readNlbState(state);
  const desired = buildDesiredLoadBalancer({
    service,
    hosts: [],
    settings: ctx.settings,
    options: parseAnnotations(service),
    subnets: nlbState.subnets?.refs ?? [],
    endpointSlices: slices,
    // Only targets are read from this model: the user's groups need no lookup for them.
    frontendSecurityGroupIds: nlbState.frontendSecurityGroups?.ids ?? [],
  });
  const recorded = nlbState.targetGroups ?? {};
  const wanted: { tg: RecordedTargetGroup; wanted: readonly string[] }[] = [];
  for (const group of desired.targetGroups) {
    const tg = recorded[group.key];
    if (group.targetType !== 'ip' || tg?.targetType !== 'ip') {
      throw Object.assign(
        new NotFoundError(`update targets: no pod target group is recorded for port ${group.key}`),
        { providerState: toProviderState(nlbState) },
      );
    }
    if (options.readTargets === true) delete tg.targets;
    wanted.push({ tg, wanted: group.targets });
  }
  await requireOwnedTargetGroups(
    ctx,
    service,
    nlbState,
    wanted.map((w) => w.tg),
  );
  await applyTargetChanges(ctx, nlbState, wanted);
  return { state: toProviderState(nlbState), instances: [] };
}
