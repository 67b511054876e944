import { DescribeSubnetsCommand, type EC2Client, type Subnet } from '@aws-sdk/client-ec2';
import { RetryableError, TerminalError } from '../core/errors';
import { translateAwsError } from '../aws/aws-errors';
import type { ProviderSettings } from './model/desired';
import { clusterTagKey } from './model/naming';
import type { IpAddressType, Scheme, SubnetRef } from './model/types';

const roleTag: Record<Scheme, string> = {
  'internet-facing': 'kubernetes.io/role/elb',
  internal: 'kubernetes.io/role/internal-elb',
};

const subnetsAnnotation = 'annotation service.beta.kubernetes.io/aws-load-balancer-subnets';

const ipAddressTypeAnnotation = 'service.beta.kubernetes.io/aws-load-balancer-ip-address-type';

/**
 * The subnets for an NLB: those named by the annotation (IDs or Name tags), else those in the
 * cluster VPC tagged for the scheme's role, one per Availability Zone. One DescribeSubnets call.
 * `roleTagRequiredBy` (a tenant policy rule) makes annotated subnets carry the role tag too.
 * A dualstack NLB needs subnets with an IPv6 CIDR: as in aws-load-balancer-controller, discovery
 * passes over the others and a named one without is an error.
 */
export async function resolveSubnets(
  ec2: EC2Client,
  settings: ProviderSettings,
  scheme: Scheme,
  annotated: readonly string[] | undefined,
  roleTagRequiredBy?: string,
  ipAddressType: IpAddressType = 'ipv4',
): Promise<SubnetRef[]> {
  const dualstack = ipAddressType === 'dualstack';
  if (annotated !== undefined) {
    const found = await resolveAnnotated(ec2, settings, annotated, scheme, roleTagRequiredBy);
    const without = found.filter((s) => ipv6Cidrs(s).length === 0);
    if (dualstack && without.length > 0) {
      throw new TerminalError(
        `${subnetsAnnotation}: ${without.map((s) => s.SubnetId ?? '').join(', ')} ${without.length > 1 ? 'have' : 'has'} no IPv6 CIDR, which annotation ${ipAddressTypeAnnotation}: dualstack needs; associate one or name other subnets`,
      );
    }
    return refs(found, dualstack);
  }
  const subnets = await describe(ec2, [
    { Name: 'vpc-id', Values: [settings.vpcId] },
    { Name: 'tag-key', Values: [roleTag[scheme]] },
  ]);
  const ownTag = clusterTagKey(settings.clusterName);
  // Subnets reserved for another cluster are not ours to use.
  const tagged = subnets.filter(
    (subnet) => !reservedElsewhere(subnet, ownTag) && hasRole(subnet, scheme),
  );
  const usable = dualstack ? tagged.filter((s) => ipv6Cidrs(s).length > 0) : tagged;
  const byZone = new Map<string, Subnet>();
  for (const subnet of usable) {
    const zone = subnet.AvailabilityZone ?? '';
    const current = byZone.get(zone);
    if (current === undefined || preferred(subnet, current, ownTag)) byZone.set(zone, subnet);
  }
  if (byZone.size === 0 && tagged.length > 0) {
    // Fixed in the VPC (or by going back to ipv4): retried, like missing tags below.
    throw new RetryableError(
      `none of the subnets tagged ${roleTag[scheme]} in VPC ${settings.vpcId} (${tagged
        .map((s) => s.SubnetId ?? '')
        .sort()
        .join(
          ', ',
        )}) has an IPv6 CIDR, which annotation ${ipAddressTypeAnnotation}: dualstack needs; associate IPv6 CIDRs with them or set the annotation to ipv4`,
      { failureClass: 'dependency' },
    );
  }
  if (byZone.size === 0) {
    // Fixed by tagging subnets, not by the spec: retried, so the tags are picked up by themselves.
    throw new RetryableError(
      `no subnets in VPC ${settings.vpcId} are tagged ${roleTag[scheme]} (value "1" or empty) for a ${scheme} load balancer; tag one subnet per Availability Zone or set the annotation service.beta.kubernetes.io/aws-load-balancer-subnets`,
      { failureClass: 'dependency' },
    );
  }
  return refs([...byZone.values()], dualstack);
}

/**
 * The subnet's associated IPv6 CIDRs. Any state but the in-between and failed ones counts:
 * moto reports associated blocks with a garbled state, and AWS reports only these six.
 */
function ipv6Cidrs(subnet: Subnet): string[] {
  const notUsable = ['associating', 'disassociating', 'disassociated', 'failing', 'failed'];
  return (subnet.Ipv6CidrBlockAssociationSet ?? [])
    .filter((a) => !notUsable.includes(a.Ipv6CidrBlockState?.State ?? ''))
    .map((a) => a.Ipv6CidrBlock ?? '')
    .filter((cidr) => cidr !== '');
}

async function resolveAnnotated(
  ec2: EC2Client,
  settings: ProviderSettings,
  wanted: readonly string[],
  scheme: Scheme,
  roleTagRequiredBy: string | undefined,
): Promise<Subnet[]> {
  const ids = wanted.filter((w) => /^subnet-[0-9a-f]+$/.test(w));
  const names = wanted.filter((w) => !ids.includes(w));
  const found: Subnet[] = [];
  if (ids.length > 0) found.push(...(await describe(ec2, [{ Name: 'subnet-id', Values: ids }])));
  if (names.length > 0) {
    found.push(
      ...(await describe(ec2, [
        { Name: 'vpc-id', Values: [settings.vpcId] },
        { Name: 'tag:Name', Values: names },
      ])),
    );
  }
  const missing = wanted.filter(
    (w) =>
      !found.some(
        (s) => s.SubnetId === w || s.Tags?.some((t) => t.Key === 'Name' && t.Value === w),
      ),
  );
  const problems: string[] = [];
  if (missing.length > 0) problems.push(`subnets not found: ${missing.join(', ')}`);
  const zones = found.map((s) => s.AvailabilityZone ?? '');
  if (new Set(zones).size !== zones.length)
    problems.push('give at most one subnet per Availability Zone');
  // Always, with or without a tenant policy: a subnet ID may name any subnet in the account.
  const ownTag = clusterTagKey(settings.clusterName);
  for (const subnet of found) {
    if (subnet.VpcId !== settings.vpcId) {
      problems.push(
        `subnet ${subnet.SubnetId ?? ''} is in ${subnet.VpcId ?? 'no VPC'}, not the cluster VPC ${settings.vpcId}`,
      );
    } else if (reservedElsewhere(subnet, ownTag)) {
      problems.push(
        `subnet ${subnet.SubnetId ?? ''} is tagged for another cluster (${clusterTags(subnet).join(', ')})`,
      );
    }
  }
  if (problems.length > 0) throw new TerminalError(`${subnetsAnnotation}: ${problems.join('; ')}`);
  const untagged = found.filter((subnet) => !hasRole(subnet, scheme));
  if (roleTagRequiredBy !== undefined && untagged.length > 0) {
    throw new TerminalError(
      `${roleTagRequiredBy}: ${subnetsAnnotation}: ${untagged.map((s) => s.SubnetId ?? '').join(', ')} not tagged ${roleTag[scheme]} (value "1" or empty), which ${scheme} load balancers need (requireSubnetRoleTag)`,
    );
  }
  return found;
}

function clusterTags(subnet: Subnet): string[] {
  return (subnet.Tags ?? [])
    .map((t) => t.Key ?? '')
    .filter((key) => key.startsWith('kubernetes.io/cluster/'));
}

/** Tagged for some cluster, and not for ours. */
function reservedElsewhere(subnet: Subnet, ownTag: string): boolean {
  const tags = clusterTags(subnet);
  return tags.length > 0 && !tags.includes(ownTag);
}

function hasRole(subnet: Subnet, scheme: Scheme): boolean {
  const role = subnet.Tags?.find((t) => t.Key === roleTag[scheme])?.Value;
  return role === '' || role === '1';
}

async function describe(
  ec2: EC2Client,
  filters: { Name: string; Values: string[] }[],
): Promise<Subnet[]> {
  try {
    const result = await ec2.send(new DescribeSubnetsCommand({ Filters: filters }));
    return result.Subnets ?? [];
  } catch (error) {
    throw translateAwsError(error, 'describe subnets');
  }
}

function preferred(candidate: Subnet, current: Subnet, ownTag: string): boolean {
  const tagged = (s: Subnet) => (s.Tags ?? []).some((t) => t.Key === ownTag);
  if (tagged(candidate) !== tagged(current)) return tagged(candidate);
  return (candidate.SubnetId ?? '') < (current.SubnetId ?? '');
}

/** IPv6 CIDRs only for a dualstack NLB, so an ipv4 NLB's stored refs stay as they were. */
function refs(subnets: readonly Subnet[], withIpv6: boolean): SubnetRef[] {
  return subnets
    .map((s) => ({
      subnetId: s.SubnetId ?? '',
      availabilityZone: s.AvailabilityZone ?? '',
      ...(withIpv6 ? { ipv6CidrBlocks: ipv6Cidrs(s) } : {}),
    }))
    .sort((a, b) => a.availabilityZone.localeCompare(b.availabilityZone));
}
