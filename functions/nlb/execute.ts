import { InvariantError, RequeueAfterError, TerminalError } from '../core/errors';
import { notFoundKind, NotVisibleYetError, translateAwsError } from '../aws/aws-errors';
import type { Plan, Step } from './model/plan';
import { createdOfKind, notVisibleYet, toProviderState } from './nlb-state';
import { applyListenerStep } from './execute-listeners';
import { applyLoadBalancerStep } from './execute-load-balancer';
import { PlanRun, type ExecuteRequest } from './execute-run';
import { applySecurityGroupStep } from './execute-security-groups';
import {
  applyTargetGroupStep,
  registerBatch,
  settleUncheckedTargetGroups,
} from './execute-target-groups';
import { expectRegistrationCalls, prebookBudgetCalls } from '../aws/registration-budget';

/**
 * Runs a plan, recording every ARN in state as it goes, with the time of each create. A failure
 * is translated into the error taxonomy and carries the state reached (`providerState`), so
 * nothing created is forgotten. A target group from CreateTargetGroup is recorded only once its
 * tags show it is ours; until then only its creation time is, dropped if its tags name another
 * owner (a delete reads the tags before it acts on one).
 */
export async function executePlan(request: ExecuteRequest): Promise<void> {
  const run = new PlanRun(request);
  // The plan's slots are booked while its first steps (the security group's, on EC2) run.
  expectRegistrationCalls(registrationCalls(request.plan));
  prebookBudgetCalls(request.clients.elbv2, { change: changeCalls(request.plan) });
  for (const batch of stepBatches(request.plan.steps)) {
    // A batch's steps at once; every one of them settled (and recorded) before the error.
    const settled = await Promise.allSettled(batch.map((step) => applyStep(run, step)));
    const index = settled.findIndex((result) => result.status === 'rejected');
    if (index < 0) continue;
    const step = batch[index]!;
    const error = (settled[index] as PromiseRejectedResult).reason as unknown;
    const translated =
      error instanceof TerminalError ||
      error instanceof InvariantError ||
      error instanceof RequeueAfterError ||
      error instanceof NotVisibleYetError
        ? error
        : (notVisibleYetAnswer(request, step, error) ??
          translateAwsError(error, describeStep(step)));
    await settleUncheckedTargetGroups(run);
    throw Object.assign(translated, { providerState: toProviderState(request.state) });
  }
  run.settleCreated();
}

/**
 * Steps of a kind that name different resources and need nothing of each other (a target group
 * per port, a listener per port): consecutive ones go side by side, one round trip for all.
 * Every other step, and the order between kinds, stays as planned.
 */
const independentKinds: ReadonlySet<Step['kind']> = new Set<Step['kind']>([
  'createTargetGroup',
  'modifyTargetGroup',
  'modifyTargetGroupAttributes',
  'registerTargets',
  'deregisterTargets',
  'deleteTargetGroup',
  'createListener',
  'modifyListener',
  'modifyListenerAttributes',
]);

export function stepBatches(steps: readonly Step[]): Step[][] {
  const batches: Step[][] = [];
  for (const step of steps) {
    const last = batches.at(-1);
    if (last !== undefined && independentKinds.has(step.kind) && last[0]!.kind === step.kind)
      last.push(step);
    else batches.push([step]);
  }
  return batches;
}

/** The plan's RegisterTargets and DeregisterTargets calls, a batch each. */
function registrationCalls(plan: Plan): Record<'register' | 'deregister', number> {
  const calls = { register: 0, deregister: 0 };
  for (const step of plan.steps) {
    if (step.kind === 'registerTargets' || step.kind === 'deregisterTargets') {
      calls[step.kind === 'registerTargets' ? 'register' : 'deregister'] += Math.ceil(
        step.targets.length / registerBatch,
      );
    }
  }
  return calls;
}

/**
 * The plan's ELBv2 calls that change something (the change budget's lane): one per step, two for a
 * tag step that both adds and removes; security group steps go to EC2.
 */
function changeCalls(plan: Plan): number {
  let calls = 0;
  for (const step of plan.steps) {
    switch (step.kind) {
      case 'createSecurityGroup':
      case 'authorizeIngress':
      case 'revokeIngress':
      case 'deleteSecurityGroup':
      case 'verifyCreatedTargetGroups':
      case 'registerTargets':
      case 'deregisterTargets':
        break;
      case 'tagResource':
        if (step.resource.type !== 'security-group') {
          calls += (Object.keys(step.add).length > 0 ? 1 : 0) + (step.remove.length > 0 ? 1 : 0);
        }
        break;
      default:
        calls++;
    }
  }
  return calls;
}

/** One step, by the executor of the resource it changes. */
async function applyStep(run: PlanRun, step: Step): Promise<void> {
  switch (step.kind) {
    case 'createSecurityGroup':
    case 'authorizeIngress':
    case 'revokeIngress':
    case 'deleteSecurityGroup':
      return applySecurityGroupStep(run, step);
    case 'createTargetGroup':
    case 'verifyCreatedTargetGroups':
    case 'modifyTargetGroup':
    case 'modifyTargetGroupAttributes':
    case 'registerTargets':
    case 'deregisterTargets':
    case 'deleteTargetGroup':
      return applyTargetGroupStep(run, step);
    case 'deleteLoadBalancer':
    case 'createLoadBalancer':
    case 'setSubnets':
    case 'setIpAddressType':
    case 'setSecurityGroups':
    case 'modifyLoadBalancerAttributes':
      return applyLoadBalancerStep(run, step);
    case 'createListener':
    case 'modifyListenerAttributes':
    case 'modifyListener':
    case 'addListenerCertificates':
    case 'removeListenerCertificates':
    case 'deleteListener':
      return applyListenerStep(run, step);
    case 'tagResource':
      await run.tag(step.resource, step.add, step.remove);
      return;
  }
}

/**
 * A step's "not found" while we have created a resource of that kind within the window: not
 * visible yet. A delete names one resource, which must be the one; the other steps name only
 * what this plan works with, so any of that kind we just made is the one AWS does not show.
 */
function notVisibleYetAnswer(
  request: ExecuteRequest,
  step: Step,
  error: unknown,
): NotVisibleYetError | undefined {
  const kind = notFoundKind(error);
  if (kind === undefined) return undefined;
  const named =
    step.kind === 'deleteLoadBalancer' ||
    step.kind === 'deleteTargetGroup' ||
    step.kind === 'deleteListener'
      ? [step.arn]
      : step.kind === 'deleteSecurityGroup'
        ? [step.id]
        : createdOfKind(request.state, kind);
  const now = (request.now ?? Date.now)();
  return notVisibleYet(request.state, named, now, describeStep(step), error);
}

/** What a plan changes, in words a user reads in an event: one entry per step. */
export function describeChanges(plan: Plan): string[] {
  return plan.steps.filter((s) => s.kind !== 'verifyCreatedTargetGroups').map(describeStep);
}

function describeStep(step: Step): string {
  switch (step.kind) {
    case 'deleteListener':
      return `delete listener on port ${step.port}`;
    case 'addListenerCertificates':
    case 'removeListenerCertificates':
      return `${step.kind === 'addListenerCertificates' ? 'add' : 'remove'} ${step.certificateArns.length} certificates on port ${step.port}`;
    case 'modifyListener':
      return `modify listener ${step.listener.protocol}:${step.listener.port}`;
    case 'modifyListenerAttributes':
      return `modify listener attributes on port ${step.port}`;
    case 'deleteTargetGroup':
      return `delete target group ${step.name}`;
    case 'modifyTargetGroup':
      return `modify health check for port ${step.key}`;
    case 'modifyTargetGroupAttributes':
      return `modify target group attributes for port ${step.key}`;
    case 'tagResource':
      return `tag ${step.resource.type}${step.resource.type === 'target-group' ? ` for port ${step.resource.key}` : ''}`;
    case 'createTargetGroup':
      return `create target group ${step.targetGroup.name}`;
    case 'createLoadBalancer':
      return `create load balancer ${step.loadBalancer.name}`;
    case 'setIpAddressType':
      return `set IP address type to ${step.ipAddressType}`;
    case 'createListener':
      return `create listener ${step.listener.protocol}:${step.listener.port}`;
    case 'registerTargets':
    case 'deregisterTargets':
      return `${step.kind === 'registerTargets' ? 'register' : 'deregister'} ${step.targets.length} targets for port ${step.key}`;
    default:
      return step.kind.replace(/([A-Z])/g, ' $1').toLowerCase();
  }
}
