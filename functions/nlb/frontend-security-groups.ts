import {
  DescribeSecurityGroupsCommand,
  type EC2Client,
  type Filter,
  type SecurityGroup,
} from '@aws-sdk/client-ec2';
import { joinProblems, quoted } from '../core/echo';
import { TerminalError } from '../core/errors';
import { translateAwsError } from '../aws/aws-errors';
import { awsPrefix } from './model/annotation-types';
import {
  foreignOwnership,
  securityGroupViolations,
  type ResolvedSecurityGroup,
  type SecurityGroupPolicy,
} from './model/security-group-admission';

const annotation = `${awsPrefix}security-groups`;

/**
 * The version of the checks below, part of the inputs a resolution is kept under: 2 added other
 * owners' tags and the tenant policy on resolved groups (issue 32), so groups resolved by an
 * earlier release are checked once more at the next full sync.
 */
export const frontendGroupChecks = 2;

const isGroupId = (value: string) => /^sg-[0-9a-f]{8,17}$/.test(value);

/**
 * The security-groups annotation's IDs and Name tags as group IDs, in the annotation's order. One
 * DescribeSecurityGroups for IDs and one for names (each only when the annotation has some). An
 * unknown group, one in another VPC, a name that more than one group in the VPC carries, or a
 * group another owner's tags claim (this controller, EKS, another controller: see
 * model/security-group-admission.ts) is a TerminalError naming every such value: nothing is
 * attached until the annotation is fixed. The tenant policy's `securityGroups` and
 * `securityGroupTags` are then checked on the resolved groups, from the same answers.
 */
export async function resolveFrontendSecurityGroups(
  ec2: EC2Client,
  vpcId: string,
  values: readonly string[],
  policy?: SecurityGroupPolicy,
): Promise<string[]> {
  const ids = values.filter(isGroupId);
  const names = values.filter((value) => !isGroupId(value));
  let byId: SecurityGroup[];
  let byName: SecurityGroup[];
  try {
    // A group-id filter, not GroupIds: an unknown ID is then missing from the answer, not an
    // error that hides which of several IDs is wrong.
    byId = ids.length > 0 ? await describe(ec2, [{ Name: 'group-id', Values: ids }]) : [];
    byName =
      names.length > 0
        ? await describe(ec2, [
            { Name: 'vpc-id', Values: [vpcId] },
            { Name: 'tag:Name', Values: names },
          ])
        : [];
  } catch (error) {
    throw translateAwsError(error, 'describe the security groups of the annotation');
  }
  const problems: string[] = [];
  const resolved = new Map<string, string>();
  for (const id of ids) {
    const group = byId.find((g) => g.GroupId === id);
    if (group === undefined) problems.push(`security group ${id} does not exist`);
    else if (group.VpcId !== vpcId)
      problems.push(`security group ${id} is in ${group.VpcId ?? 'another VPC'}, not in ${vpcId}`);
    else resolved.set(id, id);
  }
  for (const name of names) {
    const matches = byName.filter((g) => g.Tags?.some((t) => t.Key === 'Name' && t.Value === name));
    const [only] = matches;
    if (only?.GroupId === undefined) {
      problems.push(`no security group in ${vpcId} has the Name tag ${quoted(name)}`);
    } else if (matches.length > 1) {
      problems.push(
        `${matches.length} security groups in ${vpcId} have the Name tag ${quoted(name)} (${matches.map((g) => g.GroupId ?? '').join(', ')}); name one by its ID`,
      );
    } else resolved.set(name, only.GroupId);
  }
  // A group another owner's tags claim (a Service of ours, EKS, another controller) is not the
  // user's to attach: its owner could no longer delete it while our NLB holds it (issue 19's
  // rule: one namespace can hurt only itself; issue 32, finding 5).
  const groups: ResolvedSecurityGroup[] = [];
  for (const [value, id] of resolved) {
    const group = [...byId, ...byName].find((g) => g.GroupId === id);
    const tags = new Map((group?.Tags ?? []).map((t) => [t.Key ?? '', t.Value ?? '']));
    const owner = foreignOwnership(tags);
    if (owner !== undefined)
      problems.push(`security group ${quoted(value)} (${id}) ${owner}; name a group of your own`);
    groups.push({ value, id, tags });
  }
  if (problems.length > 0) {
    throw new TerminalError(`annotation ${annotation}: ${joinProblems(problems)}`);
  }
  // The tenant policy, on what the values resolved to: a pattern `sg-0abc*` is not met by a Name
  // tag `sg-0abc-team-b-db` that names another group.
  if (policy !== undefined) {
    const violations = securityGroupViolations(policy, groups);
    if (violations.length > 0)
      throw new TerminalError(`${policy.prefix}: ${joinProblems(violations)}`);
  }
  return values.map((value) => resolved.get(value) ?? '');
}

async function describe(ec2: EC2Client, filters: Filter[]): Promise<SecurityGroup[]> {
  const groups: SecurityGroup[] = [];
  let token: string | undefined;
  do {
    const page = await ec2.send(
      new DescribeSecurityGroupsCommand({ Filters: filters, NextToken: token }),
    );
    groups.push(...(page.SecurityGroups ?? []));
    token = page.NextToken || undefined;
  } while (token !== undefined);
  return groups;
}
