import { CreateSubnetCommand, type EC2Client } from '@aws-sdk/client-ec2';

/** A subnet in us-east-1c with the given tags, for tests of annotated-subnet checks; its ID. */
export async function createTaggedSubnet(
  ec2: EC2Client,
  vpcId: string,
  cidr: string,
  tags: Record<string, string>,
): Promise<string> {
  const created = await ec2.send(
    new CreateSubnetCommand({
      VpcId: vpcId,
      CidrBlock: cidr,
      AvailabilityZone: 'us-east-1c',
      TagSpecifications: [
        {
          ResourceType: 'subnet',
          Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })),
        },
      ],
    }),
  );
  return created.Subnet?.SubnetId ?? '';
}
