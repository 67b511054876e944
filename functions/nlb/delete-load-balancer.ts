import { expectBudgetCalls, prebookBudgetCalls } from '../aws/registration-budget';
import { DeleteSecurityGroupCommand } from '@aws-sdk/client-ec2';
import {
  DeleteLoadBalancerCommand,
  DeleteTargetGroupCommand,
  DeregisterTargetsCommand,
  ModifyLoadBalancerAttributesCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { RequeueAfterError, TerminalError } from '../core/errors';
import type { Service } from '../core/objects';
import type { DeleteResult, ProviderState } from '../sync/ports';
import { isAwsError, notFoundKind, resourceKindOf, translateAwsError } from '../aws/aws-errors';
import { attributesAnnotation, wantsDeletionProtection } from '../core/deletion-protection';
import { registerBatch } from './execute-target-groups';
import { targetDescription } from './model/target-ids';
import { registeredTargetIds } from './observe';
import { createdWithinWindow, readNlbState, toProviderState, type NlbState } from './nlb-state';
import { stillInUseRetrySeconds, type ProviderContext } from './provider-context';
import { inventory } from './tagged-resources';

// The provider's delete: everything the Service owns, in dependency order, or, when deletion
// protection keeps the NLB, its targets drained first.

/**
 * Deletes everything owned for the Service, found by stored ARNs and by ownership tags, in
 * dependency order. Never stops because the NLB is already gone. Groups AWS still holds
 * (ResourceInUse, DependencyViolation) are kept in state and retried after a fixed delay.
 */
export async function ensureLoadBalancerDeleted(
  ctx: ProviderContext,
  service: Service,
  state: ProviderState | undefined,
): Promise<DeleteResult> {
  const nlbState = readNlbState(state);
  const now = ctx.now();
  // The recorded resources' deletes book their slots while the inventory is taken.
  prebookBudgetCalls(ctx.clients.elbv2, {
    change:
      (nlbState.loadBalancerArn === undefined ? 0 : 1) +
      Object.keys(nlbState.targetGroups ?? {}).length,
  });
  const found = await inventory(ctx, service, nlbState, now);
  if (found.loadBalancerArns.length > 0 && wantsDeletionProtection(service)) {
    await drainKeptTargets(ctx, found.targetGroupArns, nlbState);
    // Terminal, not retried: only a change to the Service can lift it, and that re-enqueues.
    throw Object.assign(
      new TerminalError(
        `deletion protection: annotation ${attributesAnnotation} sets deletion_protection.enabled=true, so load balancer ${found.loadBalancerArns.join(', ')} is kept, with no targets; remove that key or set it to false to let the delete finish`,
      ),
      { providerState: toProviderState(nlbState), keptByDeletionProtection: true },
    );
  }
  const remaining: NlbState = {};
  const kept = new Set<string>();
  const keep = (id: string) => {
    keepRecorded(remaining, nlbState, id);
    kept.add(id);
  };
  // Recorded IDs are kept until a delete is proven: one AWS does not show yet is not gone.
  for (const id of found.notVisibleYet) keep(id);
  const deleteOrKeep = async (id: string, send: () => Promise<unknown>) => {
    try {
      await send();
    } catch (error) {
      if (notFoundKind(error) === undefined) throw error;
      if (createdWithinWindow(nlbState, id, now)) {
        keep(id);
        return;
      }
    }
    forgetDeleted(nlbState, id);
  };
  // An NLB an earlier pass deleted may still be listed by its tags for a while: not again.
  const deletedBefore = nlbState.deletedLoadBalancerArn;
  // Their slots on the fleet's change budget, booked at once.
  expectBudgetCalls({
    change:
      found.loadBalancerArns.filter((arn) => arn !== nlbState.deletedLoadBalancerArn).length +
      found.targetGroupArns.length,
  });
  try {
    for (const arn of found.loadBalancerArns) {
      if (arn === deletedBefore) continue;
      await deleteOrKeep(arn, () => deleteLoadBalancer(ctx, arn));
    }
    // With the NLB gone, its target groups and security group go side by side; each is kept
    // or forgotten on its own answer, and the first failure is thrown once all have answered.
    const settled = await Promise.allSettled([
      ...found.targetGroupArns.map(async (arn) => {
        try {
          await deleteOrKeep(arn, () =>
            ctx.clients.elbv2.send(new DeleteTargetGroupCommand({ TargetGroupArn: arn })),
          );
        } catch (error) {
          if (!isAwsError(error, 'ResourceInUse', 'ResourceInUseException')) throw error;
          keep(arn);
        }
      }),
      ...found.securityGroupIds.map(async (id) => {
        try {
          await deleteOrKeep(id, () =>
            ctx.clients.ec2.send(new DeleteSecurityGroupCommand({ GroupId: id })),
          );
        } catch (error) {
          // The NLB's network interfaces hold the group for minutes after the NLB is deleted.
          if (!isAwsError(error, 'DependencyViolation')) throw error;
          keep(id);
        }
      }),
    ]);
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
  } catch (error) {
    throw Object.assign(translateAwsError(error, 'delete load balancer resources'), {
      providerState: toProviderState(nlbState),
    });
  }
  const stillThere = kept.size > 0;
  // Kept with what is left, so a Service that wants its LB back keeps the names it had.
  if (stillThere && nlbState.namingVersion !== undefined)
    remaining.namingVersion = nlbState.namingVersion;
  // Remembered past the NLB's deletion, so the pass that finishes a slow delete can name it.
  const deleted =
    found.loadBalancerArns.find((arn) => !kept.has(arn)) ?? nlbState.deletedLoadBalancerArn;
  if (stillThere && deleted !== undefined) remaining.deletedLoadBalancerArn = deleted;
  return {
    state: toProviderState(remaining),
    ...(deleted !== undefined ? { loadBalancerId: deleted } : {}),
    ...(stillThere ? { requeueAfterSeconds: stillInUseRetrySeconds } : {}),
  };
}

/**
 * A kept NLB's target groups still send to the node ports the Service had. Once it is deleted or
 * no longer a LoadBalancer, Kubernetes frees those ports and may give them to another Service,
 * whose Pods would then get this NLB's traffic: so every target is deregistered before the NLB
 * is kept (issue 32, finding 2). One DescribeTargetHealth per group, and a DeregisterTargets per
 * group that still has targets; a failure is retried as the delete would be.
 */
async function drainKeptTargets(
  ctx: ProviderContext,
  targetGroupArns: readonly string[],
  nlbState: NlbState,
): Promise<void> {
  const recorded = Object.values(nlbState.targetGroups ?? {});
  const gone = (error: unknown) =>
    isAwsError(error, 'TargetGroupNotFound', 'TargetGroupNotFoundException');
  try {
    for (const arn of targetGroupArns) {
      // Pods are deregistered on the port each was registered with, not the group's.
      const targetType = recorded.find((tg) => tg.arn === arn)?.targetType ?? 'instance';
      // A group already gone has no targets to route anywhere.
      const ids = await registeredTargetIds(
        ctx.clients.elbv2,
        arn,
        (error) => error as Error,
        targetType,
      ).catch((error: unknown) => {
        if (gone(error)) return [];
        throw error;
      });
      for (let i = 0; i < ids.length; i += registerBatch) {
        const batch = ids.slice(i, i + registerBatch);
        await ctx.clients.elbv2.send(
          new DeregisterTargetsCommand({
            TargetGroupArn: arn,
            Targets: batch.map(targetDescription),
          }),
        );
      }
      for (const tg of recorded) if (tg.arn === arn) tg.targets = [];
    }
  } catch (error) {
    // A registration budget booked ahead is not a failure: the key comes back when it is due.
    const translated =
      error instanceof RequeueAfterError
        ? error
        : translateAwsError(error, 'deregister the kept load balancer targets');
    throw Object.assign(translated, { providerState: toProviderState(nlbState) });
  }
}

/**
 * Deletes one NLB. AWS refuses while deletion protection is on (OperationNotPermitted); the
 * Service no longer asks for it here (checked before), so protection an earlier sync set is
 * turned off and the delete tried once more. Costs nothing extra while protection is off.
 */
async function deleteLoadBalancer(ctx: ProviderContext, arn: string): Promise<void> {
  const send = () =>
    ctx.clients.elbv2.send(new DeleteLoadBalancerCommand({ LoadBalancerArn: arn }));
  try {
    await send();
  } catch (error) {
    if (!isAwsError(error, 'OperationNotPermitted', 'OperationNotPermittedException')) throw error;
    await ctx.clients.elbv2.send(
      new ModifyLoadBalancerAttributesCommand({
        LoadBalancerArn: arn,
        Attributes: [{ Key: 'deletion_protection.enabled', Value: 'false' }],
      }),
    );
    await send();
  }
}

/**
 * Takes a resource whose delete AWS confirmed out of the state a failed or deferred pass leaves:
 * the pass that comes back (for its change budget's slots, say) starts where this one stopped,
 * instead of repeating the NLB's delete and needing one slot more than it kept, every time (seen
 * against moto: 50 deletes on the change budget never finished).
 */
function forgetDeleted(nlbState: NlbState, id: string): void {
  const kind = resourceKindOf(id);
  // Its creation time would have the next inventory look for it, and take its absence for lag.
  if (nlbState.createdAt?.[id] !== undefined) {
    nlbState.createdAt = Object.fromEntries(
      Object.entries(nlbState.createdAt).filter(([key]) => key !== id),
    );
  }
  if (kind === 'load balancer') {
    if (nlbState.loadBalancerArn === id) delete nlbState.loadBalancerArn;
    nlbState.deletedLoadBalancerArn = id;
  } else if (kind === 'target group' && nlbState.targetGroups !== undefined) {
    nlbState.targetGroups = Object.fromEntries(
      Object.entries(nlbState.targetGroups).filter(([, tg]) => tg.arn !== id),
    );
  } else if (kind === 'security group' && nlbState.securityGroupId === id) {
    delete nlbState.securityGroupId;
  }
}

/** Keeps `id` in the state a delete leaves behind, with its creation time. */
function keepRecorded(remaining: NlbState, from: NlbState, id: string): void {
  const kind = resourceKindOf(id);
  if (kind === 'load balancer') remaining.loadBalancerArn ??= id;
  else if (kind === 'target group')
    remaining.targetGroups = { ...remaining.targetGroups, [id]: { arn: id, name: id } };
  else if (kind === 'security group') remaining.securityGroupId ??= id;
  const at = from.createdAt?.[id];
  if (at !== undefined) remaining.createdAt = { ...remaining.createdAt, [id]: at };
}
