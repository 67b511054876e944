import {
  AuthorizeSecurityGroupIngressCommand,
  CreateSecurityGroupCommand,
  DeleteSecurityGroupCommand,
  DescribeSecurityGroupsCommand,
  RevokeSecurityGroupIngressCommand,
  type IpPermission,
} from '@aws-sdk/client-ec2';
import { InvariantError, TerminalError } from '../core/errors';
import { isAwsError, NotVisibleYetError } from '../aws/aws-errors';
import type { Step } from './model/plan';
import { ownershipOf } from './model/naming';
import { peerKind, type IngressRule } from './model/types';
import { tagsOf } from './ownership';
import { createdWithinWindow, forgetCreated, noteCreated } from './nlb-state';
import { tagList, type PlanRun } from './execute-run';

// The NLB's own security group: created (or adopted when an earlier attempt left it), its rules,
// and its removal once the user's groups replace it.

export type SecurityGroupStep = Extract<
  Step,
  { kind: 'createSecurityGroup' | 'authorizeIngress' | 'revokeIngress' | 'deleteSecurityGroup' }
>;

export async function applySecurityGroupStep(run: PlanRun, step: SecurityGroupStep): Promise<void> {
  const { state } = run.request;
  switch (step.kind) {
    case 'createSecurityGroup':
      run.securityGroupId = await createSecurityGroup(run);
      state.securityGroupId = run.securityGroupId;
      noteCreated(state, run.securityGroupId, run.now());
      return;
    case 'authorizeIngress':
      await authorize(run, step.rules);
      return;
    case 'revokeIngress':
      await run.ec2.send(
        new RevokeSecurityGroupIngressCommand({
          GroupId: run.requireSecurityGroup(),
          IpPermissions: permissionsOf(step.rules),
        }),
      );
      return;
    case 'deleteSecurityGroup':
      await deleteReplacedSecurityGroup(run, step.id);
      return;
  }
}

async function createSecurityGroup(run: PlanRun): Promise<string> {
  const group = run.request.desired.securityGroup;
  try {
    const created = await run.ec2.send(
      new CreateSecurityGroupCommand({
        GroupName: group.name,
        Description: group.description,
        VpcId: group.vpcId,
        TagSpecifications: [{ ResourceType: 'security-group', Tags: tagList(group.tags) }],
      }),
    );
    if (created.GroupId === undefined)
      throw new InvariantError(`CreateSecurityGroup ${group.name} returned no ID`);
    return created.GroupId;
  } catch (error) {
    if (!isAwsError(error, 'InvalidGroup.Duplicate')) throw error;
    // Left behind by an earlier attempt whose result was lost: adopt it only if it is ours.
    const found = await run.ec2.send(
      new DescribeSecurityGroupsCommand({
        Filters: [
          { Name: 'group-name', Values: [group.name] },
          { Name: 'vpc-id', Values: [group.vpcId] },
        ],
      }),
    );
    const existing = found.SecurityGroups?.[0];
    const tags = tagsOf(existing?.Tags);
    // A group created moments ago may be missing from the lookup, or shown without its tags
    // (eventual consistency): only tags naming another owner prove it is not ours.
    if (existing?.GroupId === undefined || Object.keys(tags).length === 0) {
      throw new NotVisibleYetError(
        `create security group ${group.name}`,
        `the group of that name AWS says exists`,
        { cause: error },
      );
    }
    if (ownershipOf(tags, run.request.clusterName, run.request.service) !== 'ours') {
      throw new TerminalError(
        `security group ${group.name} already exists in ${group.vpcId} and is not owned by this Service; refusing to use it`,
      );
    }
    return existing.GroupId;
  }
}

async function authorize(run: PlanRun, rules: readonly IngressRule[]): Promise<void> {
  const GroupId = run.requireSecurityGroup();
  try {
    await run.ec2.send(
      new AuthorizeSecurityGroupIngressCommand({ GroupId, IpPermissions: permissionsOf(rules) }),
    );
  } catch (error) {
    if (!isAwsError(error, 'InvalidPermission.Duplicate')) throw error;
    // Some rules exist already (an adopted group): add the rest one by one.
    for (const rule of rules) {
      try {
        await run.ec2.send(
          new AuthorizeSecurityGroupIngressCommand({
            GroupId,
            IpPermissions: permissionsOf([rule]),
          }),
        );
      } catch (inner) {
        if (!isAwsError(inner, 'InvalidPermission.Duplicate')) throw inner;
      }
    }
  }
}

/**
 * The managed group the user's groups replaced. AWS may hold it for a while after it leaves the
 * NLB (DependencyViolation): it then stays recorded, and the provider comes back for it.
 */
async function deleteReplacedSecurityGroup(run: PlanRun, id: string): Promise<void> {
  const { state } = run.request;
  try {
    await run.ec2.send(new DeleteSecurityGroupCommand({ GroupId: id }));
  } catch (error) {
    if (isAwsError(error, 'DependencyViolation')) return;
    if (!isAwsError(error, 'InvalidGroup.NotFound', 'InvalidGroupId.NotFound')) throw error;
    // Not proven deleted while it may just not be visible yet: kept, and come back for.
    if (createdWithinWindow(state, id, run.now())) {
      run.unproven.add(id);
      return;
    }
  }
  if (state.securityGroupId === id) delete state.securityGroupId;
  if (run.securityGroupId === id) run.securityGroupId = undefined;
  forgetCreated(state, id);
}

export function permissionsOf(rules: readonly IngressRule[]): IpPermission[] {
  const grouped = new Map<string, IpPermission>();
  for (const rule of rules) {
    const key = `${rule.protocol}:${rule.fromPort}:${rule.toPort}`;
    const permission = grouped.get(key) ?? {
      IpProtocol: rule.protocol,
      FromPort: rule.fromPort,
      ToPort: rule.toPort,
    };
    addPeer(permission, rule.cidr);
    grouped.set(key, permission);
  }
  return [...grouped.values()];
}

/** Puts a rule's peer in the list EC2 keeps it in: IPv4 range, IPv6 range or prefix list. */
function addPeer(permission: IpPermission, peer: string): void {
  switch (peerKind(peer)) {
    case 'prefix-list':
      (permission.PrefixListIds ??= []).push({ PrefixListId: peer });
      return;
    case 'ipv6':
      (permission.Ipv6Ranges ??= []).push({ CidrIpv6: peer });
      return;
    case 'ipv4':
      (permission.IpRanges ??= []).push({ CidrIp: peer });
  }
}
