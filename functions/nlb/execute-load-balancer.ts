import {
  CreateLoadBalancerCommand,
  DeleteLoadBalancerCommand,
  DescribeLoadBalancersCommand,
  ModifyLoadBalancerAttributesCommand,
  SetIpAddressTypeCommand,
  SetSecurityGroupsCommand,
  SetSubnetsCommand,
  type LoadBalancer,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { InvariantError, TerminalError } from '../core/errors';
import { isAwsError, NotVisibleYetError } from '../aws/aws-errors';
import type { Step } from './model/plan';
import { ownershipOf } from './model/naming';
import { describeElbv2Tags, holderOf } from './ownership';
import { forgetCreated, noteCreated } from './nlb-state';
import { tagList, type PlanRun } from './execute-run';

// The load balancer itself: created (a name AWS hands back is checked by its tags), its subnets,
// address type, security groups and attributes, and its removal.

export type LoadBalancerStep = Extract<
  Step,
  {
    kind:
      | 'deleteLoadBalancer'
      | 'createLoadBalancer'
      | 'setSubnets'
      | 'setIpAddressType'
      | 'setSecurityGroups'
      | 'modifyLoadBalancerAttributes';
  }
>;

export async function applyLoadBalancerStep(run: PlanRun, step: LoadBalancerStep): Promise<void> {
  const { state } = run.request;
  switch (step.kind) {
    case 'deleteLoadBalancer':
      await run.elbv2.send(new DeleteLoadBalancerCommand({ LoadBalancerArn: step.arn }));
      run.loadBalancerArn = undefined;
      delete state.loadBalancerArn;
      delete state.dnsName;
      delete state.loadBalancerName;
      forgetCreated(state, step.arn);
      return;
    case 'createLoadBalancer': {
      const lb = step.loadBalancer;
      const withAddresses = lb.subnetMappings.some(
        (m) => m.allocationId || m.privateIPv4Address || m.ipv6Address,
      );
      const created = await createLoadBalancer(
        run,
        lb.name,
        new CreateLoadBalancerCommand({
          Name: lb.name,
          Type: 'network',
          Scheme: lb.scheme,
          IpAddressType: lb.ipAddressType,
          // Plain subnets unless addresses are pinned: the same thing for AWS, and emulators
          // ignore subnet mappings.
          ...(withAddresses
            ? {
                SubnetMappings: lb.subnetMappings.map((m) => ({
                  SubnetId: m.subnetId,
                  AllocationId: m.allocationId,
                  PrivateIPv4Address: m.privateIPv4Address,
                  IPv6Address: m.ipv6Address,
                })),
              }
            : { Subnets: lb.subnetMappings.map((m) => m.subnetId) }),
          SecurityGroups: run.securityGroupIds(),
          Tags: tagList(lb.tags),
        }),
      );
      const made = created.LoadBalancers?.[0];
      if (made?.LoadBalancerArn === undefined) {
        throw new InvariantError(`CreateLoadBalancer ${lb.name} returned no ARN`);
      }
      noteCreated(state, made.LoadBalancerArn, run.now());
      if (lb.nameFromAnnotation === true) await requireOwnLoadBalancer(run, lb.name, made, true);
      run.loadBalancerArn = made.LoadBalancerArn;
      state.loadBalancerArn = made.LoadBalancerArn;
      state.loadBalancerName = lb.name;
      state.dnsName = (made.DNSName ?? '').toLowerCase();
      return;
    }
    case 'setSubnets':
      await run.elbv2.send(
        new SetSubnetsCommand({
          LoadBalancerArn: run.requireLoadBalancer(),
          SubnetMappings: step.subnetMappings.map((m) => ({
            SubnetId: m.subnetId,
            AllocationId: m.allocationId,
            PrivateIPv4Address: m.privateIPv4Address,
            IPv6Address: m.ipv6Address,
          })),
        }),
      );
      return;
    case 'setIpAddressType':
      await run.elbv2.send(
        new SetIpAddressTypeCommand({
          LoadBalancerArn: run.requireLoadBalancer(),
          IpAddressType: step.ipAddressType,
        }),
      );
      return;
    case 'setSecurityGroups':
      await run.elbv2.send(
        new SetSecurityGroupsCommand({
          LoadBalancerArn: run.requireLoadBalancer(),
          SecurityGroups: run.securityGroupIds(),
        }),
      );
      return;
    case 'modifyLoadBalancerAttributes':
      await run.elbv2.send(
        new ModifyLoadBalancerAttributesCommand({
          LoadBalancerArn: run.requireLoadBalancer(),
          Attributes: Object.entries(step.attributes).map(([Key, Value]) => ({ Key, Value })),
        }),
      );
      return;
  }
}

/**
 * CreateLoadBalancer hands back an existing NLB of the same name and settings; with other
 * settings it refuses (DuplicateLoadBalancerName). Our lookup by name found none before the
 * create, so the holder is one an earlier attempt made that AWS does not show yet (retried: the
 * next pass finds it by name), unless its tags, once shown, name another owner.
 */
async function createLoadBalancer(run: PlanRun, name: string, command: CreateLoadBalancerCommand) {
  try {
    return await run.elbv2.send(command);
  } catch (error) {
    if (!isAwsError(error, 'DuplicateLoadBalancerName', 'DuplicateLoadBalancerNameException'))
      throw error;
    const holder = await loadBalancerNamed(run, name);
    if (holder !== undefined) await requireOwnLoadBalancer(run, name, holder, false);
    throw new NotVisibleYetError(
      `create load balancer ${name}`,
      'the load balancer of that name AWS says exists',
      { cause: error },
    );
  }
}

async function loadBalancerNamed(run: PlanRun, name: string): Promise<LoadBalancer | undefined> {
  try {
    const found = await run.elbv2.send(new DescribeLoadBalancersCommand({ Names: [name] }));
    return found.LoadBalancers?.[0];
  } catch (error) {
    if (isAwsError(error, 'LoadBalancerNotFound', 'LoadBalancerNotFoundException'))
      return undefined;
    throw error;
  }
}

/**
 * CreateLoadBalancer hands back an existing NLB of the same name and settings, whoever owns it.
 * A derived name carries a hash of the Service; a name from the annotation does not, so its
 * answer is checked by tags before anything of it is recorded or changed (one read). An NLB
 * without tags yet is one just created: retried, not refused.
 */
async function requireOwnLoadBalancer(
  run: PlanRun,
  name: string,
  made: LoadBalancer,
  fromAnnotation: boolean,
): Promise<void> {
  const arn = made.LoadBalancerArn ?? '';
  const tags = (await describeElbv2Tags(run.elbv2, [arn])).get(arn) ?? {};
  if (ownershipOf(tags, run.request.clusterName, run.request.service) === 'ours') return;
  if (Object.keys(tags).length === 0)
    throw new NotVisibleYetError(`create load balancer ${name}`, `the tags of ${arn}`);
  run.disown(arn);
  const annotation = fromAnnotation
    ? ' (annotation service.beta.kubernetes.io/aws-load-balancer-name)'
    : '';
  throw new TerminalError(
    `load balancer name ${name}${annotation} is already taken by ${arn}, which belongs to ${holderOf(tags)}; refusing to use it${fromAnnotation ? ': choose another name' : ''}`,
  );
}
