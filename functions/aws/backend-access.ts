import {
  AuthorizeSecurityGroupIngressCommand,
  CreateSecurityGroupCommand,
  DeleteSecurityGroupCommand,
  DescribeSecurityGroupsCommand,
  RevokeSecurityGroupIngressCommand,
  type EC2Client,
  type IpPermission,
} from '@aws-sdk/client-ec2';
import { isAwsError, translateAwsError } from './aws-errors';
import { clusterTagKey, nameHash, ownershipTags } from './model/naming';

/** NodePorts, and kube-proxy's health port (the health check of UDP-only ports). */
const nodePortRange = { from: 30000, to: 32767 };
const kubeProxyHealthPort = 10256;

export interface BackendAccessSettings {
  readonly clusterName: string;
  readonly vpcId: string;
  /** The security groups of the nodes (for EKS, the cluster security group). */
  readonly nodeSecurityGroupIds: readonly string[];
}

/**
 * The cluster-wide half of NLB security: one backend security group that every NLB carries, and on
 * each node security group one rule per protocol allowing that group on the NodePort range — not a
 * rule per Service × port × CIDR, which runs into the 60-rule limit (cloud-provider-aws #90).
 * Idempotent; run at install, not per sync. Returns the backend group's ID.
 */
export async function ensureBackendAccess(
  ec2: EC2Client,
  settings: BackendAccessSettings,
): Promise<string> {
  try {
    const groupId =
      (await findBackendGroup(ec2, settings)) ?? (await createBackendGroup(ec2, settings));
    const found = await ec2.send(
      new DescribeSecurityGroupsCommand({ GroupIds: [...settings.nodeSecurityGroupIds] }),
    );
    for (const nodeGroup of found.SecurityGroups ?? []) {
      const missing = backendPermissions(groupId).filter(
        (wanted) =>
          !(nodeGroup.IpPermissions ?? []).some((p) => sameSourcePermission(p, wanted, groupId)),
      );
      if (missing.length > 0) {
        await ec2.send(
          new AuthorizeSecurityGroupIngressCommand({
            GroupId: nodeGroup.GroupId,
            IpPermissions: missing,
          }),
        );
      }
    }
    return groupId;
  } catch (error) {
    throw translateAwsError(error, 'ensure backend security group access');
  }
}

/** Undoes ensureBackendAccess: revokes the node rules and deletes the backend group (uninstall). */
export async function removeBackendAccess(
  ec2: EC2Client,
  settings: BackendAccessSettings,
): Promise<void> {
  try {
    const groupId = await findBackendGroup(ec2, settings);
    if (groupId === undefined) return;
    for (const nodeGroupId of settings.nodeSecurityGroupIds) {
      try {
        await ec2.send(
          new RevokeSecurityGroupIngressCommand({
            GroupId: nodeGroupId,
            IpPermissions: backendPermissions(groupId),
          }),
        );
      } catch (error) {
        if (!isAwsError(error, 'InvalidPermission.NotFound', 'InvalidGroup.NotFound')) throw error;
      }
    }
    await ec2.send(new DeleteSecurityGroupCommand({ GroupId: groupId }));
  } catch (error) {
    throw translateAwsError(error, 'remove backend security group access');
  }
}

/**
 * The group is found by its tags, never by this name, so the name's hash changing (SHA-256 since
 * naming version 2) leaves an installed group in place.
 */
export function backendGroupName(clusterName: string): string {
  return `k8s-traffic-${clusterName
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '')
    .slice(0, 40)}-${nameHash([clusterName])}`;
}

async function findBackendGroup(
  ec2: EC2Client,
  settings: BackendAccessSettings,
): Promise<string | undefined> {
  const found = await ec2.send(
    new DescribeSecurityGroupsCommand({
      Filters: [
        { Name: 'vpc-id', Values: [settings.vpcId] },
        { Name: `tag:${ownershipTags.cluster}`, Values: [settings.clusterName] },
        { Name: `tag:${ownershipTags.resource}`, Values: ['backend-security-group'] },
      ],
    }),
  );
  return found.SecurityGroups?.[0]?.GroupId;
}

async function createBackendGroup(
  ec2: EC2Client,
  settings: BackendAccessSettings,
): Promise<string> {
  const created = await ec2.send(
    new CreateSecurityGroupCommand({
      GroupName: backendGroupName(settings.clusterName),
      Description: `Network Load Balancers of cluster ${settings.clusterName} to its nodes`,
      VpcId: settings.vpcId,
      TagSpecifications: [
        {
          ResourceType: 'security-group',
          Tags: [
            { Key: ownershipTags.cluster, Value: settings.clusterName },
            { Key: ownershipTags.resource, Value: 'backend-security-group' },
            { Key: clusterTagKey(settings.clusterName), Value: 'owned' },
          ],
        },
      ],
    }),
  );
  return created.GroupId ?? '';
}

function backendPermissions(groupId: string): IpPermission[] {
  const from = (protocol: string, fromPort: number, toPort: number): IpPermission => ({
    IpProtocol: protocol,
    FromPort: fromPort,
    ToPort: toPort,
    UserIdGroupPairs: [{ GroupId: groupId, Description: 'NLB traffic and health checks' }],
  });
  return [
    from('tcp', nodePortRange.from, nodePortRange.to),
    from('udp', nodePortRange.from, nodePortRange.to),
    from('tcp', kubeProxyHealthPort, kubeProxyHealthPort),
  ];
}

function sameSourcePermission(
  existing: IpPermission,
  wanted: IpPermission,
  groupId: string,
): boolean {
  return (
    existing.IpProtocol === wanted.IpProtocol &&
    existing.FromPort === wanted.FromPort &&
    existing.ToPort === wanted.ToPort &&
    (existing.UserIdGroupPairs ?? []).some((pair) => pair.GroupId === groupId)
  );
}
