import {
  CreateSecurityGroupCommand,
  CreateVpcCommand,
  DescribeSecurityGroupsCommand,
  EC2Client,
} from '@aws-sdk/client-ec2';
import { describe, expect, it } from 'vitest';
import {
  backendGroupName,
  ensureBackendAccess,
  removeBackendAccess,
} from '../../functions/aws/backend-access';
import { ownershipTags } from '../../functions/aws/model/naming';
import { AwsCallRecorder } from '../support/aws-calls';
import { MotoAccount } from '../support/moto';

async function setup() {
  const account = new MotoAccount();
  const recorder = new AwsCallRecorder();
  const ec2 = recorder.attach(account.client(EC2Client));
  const vpc = await ec2.send(new CreateVpcCommand({ CidrBlock: '10.0.0.0/16' }));
  const vpcId = vpc.Vpc?.VpcId ?? '';
  const node = await ec2.send(
    new CreateSecurityGroupCommand({ GroupName: 'nodes', Description: 'nodes', VpcId: vpcId }),
  );
  const settings = { clusterName: 'c1', vpcId, nodeSecurityGroupIds: [node.GroupId ?? ''] };
  const nodeRules = async () => {
    const found = await ec2.send(
      new DescribeSecurityGroupsCommand({ GroupIds: [node.GroupId ?? ''] }),
    );
    return (found.SecurityGroups?.[0]?.IpPermissions ?? [])
      .map(
        (p) =>
          `${p.IpProtocol}:${p.FromPort}-${p.ToPort}:${p.UserIdGroupPairs?.map((g) => g.GroupId).join()}`,
      )
      .sort();
  };
  recorder.reset();
  return { ec2, recorder, settings, nodeRules };
}

describe('backend security group access', () => {
  it('creates one backend group and one rule per protocol on the node group, not per Service or port', async () => {
    const { ec2, settings, nodeRules } = await setup();
    const backend = await ensureBackendAccess(ec2, settings);
    expect(await nodeRules()).toEqual([
      `tcp:10256-10256:${backend}`,
      `tcp:30000-32767:${backend}`,
      `udp:30000-32767:${backend}`,
    ]);
  });

  it('is idempotent: a second run finds the group and the rules and writes nothing', async () => {
    const { ec2, recorder, settings, nodeRules } = await setup();
    const first = await ensureBackendAccess(ec2, settings);
    const rules = await nodeRules();
    recorder.reset();
    expect(await ensureBackendAccess(ec2, settings)).toBe(first);
    expect(await nodeRules()).toEqual(rules);
    expect(Object.keys(recorder.byOperation())).toEqual(['EC2.DescribeSecurityGroups']);
  });

  it('keeps a group installed under the old 40-bit name: found by its tags, not recreated', async () => {
    const { ec2, recorder, settings } = await setup();
    const installed = await ec2.send(
      new CreateSecurityGroupCommand({
        GroupName: 'k8s-traffic-c1-0123456789',
        Description: 'installed by an earlier release',
        VpcId: settings.vpcId,
        TagSpecifications: [
          {
            ResourceType: 'security-group',
            Tags: [
              { Key: ownershipTags.cluster, Value: 'c1' },
              { Key: ownershipTags.resource, Value: 'backend-security-group' },
            ],
          },
        ],
      }),
    );
    recorder.reset();
    expect(await ensureBackendAccess(ec2, settings)).toBe(installed.GroupId);
    expect(recorder.count('CreateSecurityGroup')).toBe(0);
    expect(backendGroupName('c1')).toMatch(/^k8s-traffic-c1-[0-9a-z]{10}$/);
  });

  it('removes the rules and the group on uninstall, and removing twice is harmless', async () => {
    const { ec2, settings, nodeRules } = await setup();
    await ensureBackendAccess(ec2, settings);
    await removeBackendAccess(ec2, settings);
    expect(await nodeRules()).toEqual([]);
    await expect(removeBackendAccess(ec2, settings)).resolves.toBeUndefined();
  });
});
