import { DescribeSubnetsCommand, type EC2Client, type Subnet } from '@aws-sdk/client-ec2';
import { RetryableError, TerminalError } from '../core/errors';
import { translateAwsError } from './aws-errors';
import type { ProviderSettings } from './model/desired';
import { clusterTagKey } from './model/naming';
import type { Scheme, SubnetRef } from './model/types';

const roleTag: Record<Scheme, string> = {
  'internet-facing': 'kubernetes.io/role/elb',
  internal: 'kubernetes.io/role/internal-elb',
};

/**
 * The subnets for an NLB: those named by the annotation (IDs or Name tags), else those in the
 * cluster VPC tagged for the scheme's role, one per Availability Zone. One DescribeSubnets call.
 */
export async function resolveSubnets(
  ec2: EC2Client,
  settings: ProviderSettings,
  scheme: Scheme,
  annotated: readonly string[] | undefined,
): Promise<SubnetRef[]> {
  if (annotated !== undefined) return resolveAnnotated(ec2, settings, annotated);
  const subnets = await describe(ec2, [
    { Name: 'vpc-id', Values: [settings.vpcId] },
    { Name: 'tag-key', Values: [roleTag[scheme]] },
  ]);
  const ownTag = clusterTagKey(settings.clusterName);
  // Subnets reserved for another cluster are not ours to use.
  const usable = subnets.filter((subnet) => {
    const clusterTags = (subnet.Tags ?? []).filter((t) =>
      t.Key?.startsWith('kubernetes.io/cluster/'),
    );
    const role = subnet.Tags?.find((t) => t.Key === roleTag[scheme])?.Value;
    return (
      (clusterTags.length === 0 || clusterTags.some((t) => t.Key === ownTag)) &&
      (role === '' || role === '1')
    );
  });
  const byZone = new Map<string, Subnet>();
  for (const subnet of usable) {
    const zone = subnet.AvailabilityZone ?? '';
    const current = byZone.get(zone);
    if (current === undefined || preferred(subnet, current, ownTag)) byZone.set(zone, subnet);
  }
  if (byZone.size === 0) {
    // Fixed by tagging subnets, not by the spec: retried, so the tags are picked up by themselves.
    throw new RetryableError(
      `no subnets in VPC ${settings.vpcId} are tagged ${roleTag[scheme]} (value "1" or empty) for a ${scheme} load balancer; tag one subnet per Availability Zone or set the annotation service.beta.kubernetes.io/aws-load-balancer-subnets`,
      { failureClass: 'dependency' },
    );
  }
  return refs([...byZone.values()]);
}

async function resolveAnnotated(
  ec2: EC2Client,
  settings: ProviderSettings,
  wanted: readonly string[],
): Promise<SubnetRef[]> {
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
  if (problems.length > 0) {
    throw new TerminalError(
      `annotation service.beta.kubernetes.io/aws-load-balancer-subnets: ${problems.join('; ')}`,
    );
  }
  return refs(found);
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

function refs(subnets: readonly Subnet[]): SubnetRef[] {
  return subnets
    .map((s) => ({ subnetId: s.SubnetId ?? '', availabilityZone: s.AvailabilityZone ?? '' }))
    .sort((a, b) => a.availabilityZone.localeCompare(b.availabilityZone));
}
