import {
  DeregisterTargetsCommand,
  RegisterTargetsCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { errorMessage, NotFoundError, RequeueAfterError, TerminalError } from '../core/errors';
import type { Host } from '../core/hosts';
import type { Service } from '../core/objects';
import type { EnsureResult, ProviderState, UpdateOptions, UpdateResult } from '../sync/ports';
import { isAwsError, translateAwsError } from '../aws/aws-errors';
import { pacedByRegistrations, reserveRegistrationSlots } from '../aws/registration-budget';
import { registerBatch } from './execute-target-groups';
import { limits } from './model/desired';
import { ownershipTags } from './model/naming';
import { registeredTargetIds } from './observe';
import { describeElbv2Tags, sortByOwnership } from './ownership';
import { targetDescription } from './model/target-ids';
import { readNlbState, toProviderState, type NlbState } from './nlb-state';
import { uniqueSorted, type ProviderContext } from './provider-context';

// The provider's host update: targets registered and deregistered in the recorded target groups,
// with nothing else read but their ownership tags (and their targets, where none are recorded).

/**
 * Node changes only: registers new instances and deregisters gone ones, from the targets state
 * recorded, in every target group. The only read is one DescribeTags of the recorded groups:
 * state is not proof of ownership, so a group whose tags name another Service or cluster is
 * refused before any write. A group whose targets are not recorded (too many, or an older
 * record) is read with one DescribeTargetHealth; without any recorded group it is a full Ensure
 * (`fullEnsure`: the provider's own ensureLoadBalancer with these hosts and this state).
 */
export async function updateLoadBalancer(
  ctx: ProviderContext,
  service: Service,
  hosts: readonly Host[],
  state: ProviderState | undefined,
  options: UpdateOptions,
  fullEnsure: () => Promise<EnsureResult>,
): Promise<UpdateResult> {
  const nlbState = readNlbState(state);
  const recorded = Object.values(nlbState.targetGroups ?? {});
  if (recorded.length === 0) {
    const ensured = await fullEnsure();
    return { state: ensured.state, instances: ensured.instances, summary: ensured.summary };
  }
  // Pod target groups have no node in them: a Service whose targets are all pods has nothing to
  // update, and is not asked anything.
  const groups = recorded.filter((tg) => tg.targetType !== 'ip');
  if (groups.length === 0) return { state: toProviderState(nlbState), instances: [] };
  if (options.readTargets === true) for (const tg of groups) delete tg.targets;
  if (hosts.length > limits.targetsPerTargetGroup) {
    throw new TerminalError(
      `${hosts.length} eligible nodes exceed the ${limits.targetsPerTargetGroup} targets a target group can hold`,
    );
  }
  const wanted = uniqueSorted(hosts.map((h) => h.instanceId));
  await applyTargetChanges(
    ctx,
    nlbState,
    groups.map((tg) => ({ tg, wanted })),
    () => requireOwnedTargetGroups(ctx, service, nlbState, groups),
  );
  return { state: toProviderState(nlbState), instances: wanted };
}

/** A recorded target group (nlb-state.ts), changed in place as its targets change. */
export type RecordedTargetGroup = NonNullable<NlbState['targetGroups']>[string];

/**
 * Brings each group's registered targets to `wanted`, with nothing read but, for a group whose
 * targets are not recorded (too many, an older record, or `readTargets`), one
 * DescribeTargetHealth. The groups are changed side by side. Removals first (a node that left, or a pod on its way out, matters more
 * than a new one, and the registration budget gives them priority), except where a group would
 * drop to zero targets in between: there the new targets go in first. In batches of 200, each
 * recorded as it lands, so a failure part-way keeps what was done (on the error's
 * `providerState`).
 *
 * With changes to make, their slots on the registration budget are booked first (issue 37): a
 * pass whose slots are too far off to wait for ends there, before `beforeWrites` (the ownership
 * check) spends a call, and its message comes back when they are due. With none, nothing is
 * checked or written.
 */
export async function applyTargetChanges(
  ctx: ProviderContext,
  nlbState: NlbState,
  wanted: readonly { readonly tg: RecordedTargetGroup; readonly wanted: readonly string[] }[],
  beforeWrites: () => Promise<void>,
): Promise<void> {
  try {
    for (const { tg } of wanted) {
      // A group gone is drift for the full sync (NotFoundError), not a failure to retry as is.
      tg.targets ??= await registeredTargetIds(
        ctx.clients.elbv2,
        tg.arn,
        (error, action) =>
          groupGone(error) ? driftError(error) : translateAwsError(error, action),
        tg.targetType ?? 'instance',
      );
    }
  } catch (error) {
    throw Object.assign(error as Error, { providerState: toProviderState(nlbState) });
  }
  const changes = wanted.map(({ tg, wanted: ids }) => {
    const current = tg.targets ?? [];
    // Sets: at thousands of nodes a list search per id is millions of comparisons per group.
    const registered = new Set(current);
    const wantedIds = new Set(ids);
    const register = ids.filter((id) => !registered.has(id));
    const deregister = current.filter((id) => !wantedIds.has(id));
    return { tg, ids, register, deregister, keepsTargets: current.length > deregister.length };
  });
  const batches = (ids: readonly string[]) => Math.ceil(ids.length / registerBatch);
  const calls = {
    register: changes.reduce((n, c) => n + batches(c.register), 0),
    deregister: changes.reduce((n, c) => n + batches(c.deregister), 0),
  };
  if (calls.register + calls.deregister === 0) {
    for (const c of changes) c.tg.targets = [...c.ids].sort();
    return;
  }
  try {
    await reserveRegistrationSlots(ctx.clients.elbv2, calls);
  } catch (error) {
    throw Object.assign(error as Error, { providerState: toProviderState(nlbState) });
  }
  await pacedByRegistrations(beforeWrites);
  const send = async (tg: RecordedTargetGroup, kind: 'register' | 'deregister', ids: string[]) => {
    for (let i = 0; i < ids.length; i += registerBatch) {
      const batch = ids.slice(i, i + registerBatch);
      const input = { TargetGroupArn: tg.arn, Targets: batch.map(targetDescription) };
      await ctx.clients.elbv2.send(
        kind === 'register'
          ? new RegisterTargetsCommand(input)
          : new DeregisterTargetsCommand(input),
      );
      const current = new Set(tg.targets ?? []);
      for (const id of batch) {
        if (kind === 'register') current.add(id);
        else current.delete(id);
      }
      tg.targets = [...current].sort();
    }
  };
  // The groups of one phase at once (each on its own slot); every call of the phase settled, and
  // recorded, before the next phase or the error.
  const phase = async (calls: readonly (() => Promise<void>)[]) => {
    const settled = await Promise.allSettled(calls.map((call) => call()));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed !== undefined) throw failed.reason as Error;
  };
  try {
    await phase(
      changes
        .filter((c) => c.keepsTargets)
        .map((c) => () => send(c.tg, 'deregister', c.deregister)),
    );
    await phase(changes.map((c) => () => send(c.tg, 'register', c.register)));
    await phase(
      changes
        .filter((c) => !c.keepsTargets)
        .map((c) => () => send(c.tg, 'deregister', c.deregister)),
    );
    for (const c of changes) c.tg.targets = [...c.ids].sort();
  } catch (error) {
    // A target group deleted behind our back: drift, which only a full Ensure repairs. A
    // registration budget booked ahead is not a failure: the key comes back later.
    const translated = groupGone(error)
      ? driftError(error)
      : error instanceof RequeueAfterError
        ? error
        : translateAwsError(error, 'update targets');
    throw Object.assign(translated, { providerState: toProviderState(nlbState) });
  }
}

function groupGone(error: unknown): boolean {
  return isAwsError(error, 'TargetGroupNotFound', 'TargetGroupNotFoundException');
}

function driftError(error: unknown): NotFoundError {
  return new NotFoundError(`update targets: ${errorMessage(error)}`, { cause: error });
}

/**
 * The recorded target groups a targets update writes to, checked by their tags first: one
 * DescribeTags for up to 20 groups. Another owner's group is a terminal error naming it; a group
 * that is gone (or carries no tags at all) is drift, which a full Ensure sorts out.
 */
export async function requireOwnedTargetGroups(
  ctx: ProviderContext,
  service: Service,
  nlbState: NlbState,
  groups: readonly RecordedTargetGroup[],
): Promise<void> {
  const arns = groups.map((tg) => tg.arn);
  const withState = { providerState: toProviderState(nlbState) };
  let owned;
  try {
    const tags = await describeElbv2Tags(ctx.clients.elbv2, arns);
    owned = sortByOwnership(arns, tags, ctx.settings.clusterName, service);
  } catch (error) {
    throw Object.assign(translateAwsError(error, 'read target group tags'), withState);
  }
  if (owned.foreign.length > 0) {
    throw new TerminalError(
      `target group ${owned.foreign.join(', ')} recorded for this Service is not owned by this Service in cluster ${ctx.settings.clusterName} (ownership tags ${ownershipTags.cluster} and ${ownershipTags.serviceUid} do not match); refusing to change its targets`,
    );
  }
  if (owned.unknown.length > 0) {
    throw Object.assign(
      new NotFoundError(
        `update targets: target group ${owned.unknown.join(', ')} is gone or carries no tags`,
      ),
      withState,
    );
  }
}
