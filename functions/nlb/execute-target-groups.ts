import {
  CreateTargetGroupCommand,
  DeleteTargetGroupCommand,
  DeregisterTargetsCommand,
  DescribeTargetGroupsCommand,
  ModifyTargetGroupAttributesCommand,
  ModifyTargetGroupCommand,
  RegisterTargetsCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { InvariantError, TerminalError } from '../core/errors';
import { isAwsError, NotVisibleYetError } from '../aws/aws-errors';
import type { Step } from './model/plan';
import type { DesiredTargetGroup, HealthCheck } from './model/types';
import { forgetCreated, noteCreated } from './nlb-state';
import { tagList, type PlanRun } from './execute-run';
import { targetDescription } from './model/target-ids';

// Target groups: created and proven ours by their tags before anything of them is recorded, their
// health checks, attributes and targets, and their removal.

export type TargetGroupStep = Extract<
  Step,
  {
    kind:
      | 'createTargetGroup'
      | 'verifyCreatedTargetGroups'
      | 'modifyTargetGroup'
      | 'modifyTargetGroupAttributes'
      | 'registerTargets'
      | 'deregisterTargets'
      | 'deleteTargetGroup';
  }
>;

export async function applyTargetGroupStep(run: PlanRun, step: TargetGroupStep): Promise<void> {
  const { state, desired } = run.request;
  switch (step.kind) {
    case 'createTargetGroup': {
      const tg = step.targetGroup;
      const arn = await createTargetGroup(run, tg, desired.securityGroup.vpcId);
      if (arn === undefined)
        throw new InvariantError(`CreateTargetGroup ${tg.name} returned no ARN`);
      // Dated now, recorded once its tags prove it ours: a group AWS does not show in full yet
      // is still found by a delete right after (tagged-resources.ts inventory).
      noteCreated(state, arn, run.now());
      run.targetGroupArns[tg.key] = arn;
      run.uncheckedTargetGroups.push({ key: tg.key, arn, name: tg.name });
      return;
    }
    case 'verifyCreatedTargetGroups':
      await verifyCreatedTargetGroups(run);
      return;
    case 'modifyTargetGroup':
      await run.elbv2.send(
        new ModifyTargetGroupCommand({
          TargetGroupArn: run.targetGroupArn(step.key),
          ...healthCheckFields(step.healthCheck),
        }),
      );
      return;
    case 'modifyTargetGroupAttributes':
      await run.elbv2.send(
        new ModifyTargetGroupAttributesCommand({
          TargetGroupArn: run.targetGroupArn(step.key),
          Attributes: Object.entries(step.attributes).map(([Key, Value]) => ({ Key, Value })),
        }),
      );
      return;
    case 'registerTargets':
    case 'deregisterTargets': {
      const arn = run.targetGroupArn(step.key);
      for (let i = 0; i < step.targets.length; i += registerBatch) {
        const Targets = step.targets.slice(i, i + registerBatch).map(targetDescription);
        await run.elbv2.send(
          step.kind === 'registerTargets'
            ? new RegisterTargetsCommand({ TargetGroupArn: arn, Targets })
            : new DeregisterTargetsCommand({ TargetGroupArn: arn, Targets }),
        );
      }
      const record = state.targetGroups?.[step.key];
      if (record !== undefined) {
        const current = new Set(record.targets ?? []);
        for (const id of step.targets) {
          if (step.kind === 'registerTargets') current.add(id);
          else current.delete(id);
        }
        record.targets = [...current].sort();
      }
      return;
    }
    case 'deleteTargetGroup':
      await run.elbv2.send(new DeleteTargetGroupCommand({ TargetGroupArn: step.arn }));
      for (const [key, tg] of Object.entries(state.targetGroups ?? {})) {
        if (tg.arn === step.arn) delete state.targetGroups?.[key];
      }
      forgetCreated(state, step.arn);
      return;
  }
}

/**
 * CreateTargetGroup hands back an existing group of the same name and settings. With other
 * settings it refuses (DuplicateTargetGroupName): a group an earlier attempt created, whose answer
 * was lost, before the Service's health check changed. That one is found by name and brought to
 * the desired health check; verifyCreatedTargetGroups then adopts it only if it is ours.
 */
async function createTargetGroup(
  run: PlanRun,
  tg: DesiredTargetGroup,
  vpcId: string,
): Promise<string | undefined> {
  try {
    const created = await run.elbv2.send(
      new CreateTargetGroupCommand({
        Name: tg.name,
        Protocol: tg.protocol,
        Port: tg.port,
        VpcId: vpcId,
        TargetType: tg.targetType,
        ...healthCheckFields(tg.healthCheck),
        Tags: tagList(tg.tags),
      }),
    );
    return created.TargetGroups?.[0]?.TargetGroupArn;
  } catch (error) {
    if (!isAwsError(error, 'DuplicateTargetGroupName', 'DuplicateTargetGroupNameException'))
      throw error;
    const arn = await targetGroupNamed(run, tg.name);
    // Created moments ago and not in the lookup yet (eventual consistency): not someone else's.
    if (arn === undefined) {
      throw new NotVisibleYetError(
        `create target group ${tg.name}`,
        'the target group of that name AWS says exists',
        { cause: error },
      );
    }
    await verifyOwnership(run, tg.name, arn);
    await run.elbv2.send(
      new ModifyTargetGroupCommand({ TargetGroupArn: arn, ...healthCheckFields(tg.healthCheck) }),
    );
    return arn;
  }
}

/** The ARN of the target group of that name, if AWS shows one. */
async function targetGroupNamed(run: PlanRun, name: string): Promise<string | undefined> {
  try {
    const found = await run.elbv2.send(new DescribeTargetGroupsCommand({ Names: [name] }));
    return found.TargetGroups?.[0]?.TargetGroupArn;
  } catch (error) {
    if (isAwsError(error, 'TargetGroupNotFound', 'TargetGroupNotFoundException')) return undefined;
    throw error;
  }
}

/**
 * One DescribeTags for every group created so far; ours are recorded, a foreign one refused. A
 * group without tags (or whose tags AWS does not find) is one just created that AWS does not
 * show in full yet: only dated (a delete right after still finds it), and the pass retried.
 */
async function verifyCreatedTargetGroups(run: PlanRun): Promise<void> {
  const created = run.uncheckedTargetGroups;
  if (created.length === 0) return;
  run.uncheckedTargetGroups = [];
  const owned = await run.ownedOf(created.map((tg) => tg.arn));
  for (const tg of created) {
    if (owned.ours.includes(tg.arn)) run.record(tg);
    else delete run.targetGroupArns[tg.key];
  }
  for (const arn of owned.foreign) run.disown(arn);
  const refused = created.find((tg) => owned.foreign.includes(tg.arn));
  if (refused !== undefined) throw refusal(refused.name, refused.arn);
  if (owned.unknown.length > 0) {
    throw new NotVisibleYetError(
      'verify created target groups',
      `the tags of target group ${owned.unknown.join(', ')}`,
    );
  }
}

/**
 * After a failure: records the created groups whose tags say they are ours, and forgets the
 * rest. When even that read fails, none is recorded; ours carry our tags from their creation,
 * so a later delete still finds them by tags.
 */
export async function settleUncheckedTargetGroups(run: PlanRun): Promise<void> {
  const created = run.uncheckedTargetGroups;
  if (created.length === 0) return;
  run.uncheckedTargetGroups = [];
  try {
    const owned = await run.ownedOf(created.map((tg) => tg.arn));
    for (const tg of created) if (owned.ours.includes(tg.arn)) run.record(tg);
    for (const arn of owned.foreign) run.disown(arn);
  } catch {
    // The original failure is the one to report.
  }
}

/**
 * Before a group found by name is changed: refused if its tags name another owner; retried
 * while AWS shows it without tags (just created).
 */
async function verifyOwnership(run: PlanRun, name: string, arn: string): Promise<void> {
  const owned = await run.ownedOf([arn]);
  if (owned.ours.includes(arn)) return;
  if (owned.foreign.includes(arn)) {
    run.disown(arn);
    throw refusal(name, arn);
  }
  throw new NotVisibleYetError(`create target group ${name}`, `the tags of ${arn}`);
}

/** AWS accepts at most this many targets per RegisterTargets call (the anchors batch by 200). */
export const registerBatch = 200;

/** AWS handed back someone else's target group of our name: nothing of it is recorded or changed. */
function refusal(name: string, arn: string): TerminalError {
  return new TerminalError(
    `target group ${name} (${arn}) already exists with our name and is not owned by this Service; refusing to use it`,
  );
}

function healthCheckFields(check: HealthCheck) {
  const http = check.protocol !== 'TCP';
  return {
    HealthCheckEnabled: true,
    HealthCheckProtocol: check.protocol,
    HealthCheckPort: check.port,
    HealthCheckIntervalSeconds: check.intervalSeconds,
    HealthCheckTimeoutSeconds: check.timeoutSeconds,
    HealthyThresholdCount: check.healthyThreshold,
    UnhealthyThresholdCount: check.unhealthyThreshold,
    ...(http ? { HealthCheckPath: check.path, Matcher: { HttpCode: check.successCodes } } : {}),
  };
}
