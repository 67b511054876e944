import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  ResourceNotFoundException,
} from '@aws-sdk/client-dynamodb';
import {
  CreateSecurityGroupCommand,
  CreateSubnetCommand,
  CreateVpcCommand,
  EC2Client,
  RunInstancesCommand,
} from '@aws-sdk/client-ec2';
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  QueueDoesNotExist,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { resendAfterReceives } from '../contract/queue-limits';
import { callerRoleOption } from '../aws/caller-role';

export interface AwsAccess {
  readonly region: string;
  /** One endpoint for every AWS service (an emulator); the SDK's own resolution when absent. */
  readonly endpoint?: string | undefined;
  readonly credentials?: { accessKeyId: string; secretAccessKey: string } | undefined;
}

export function clientConfig(aws: AwsAccess) {
  return {
    region: aws.region,
    ...callerRoleOption('operator'),
    ...(aws.endpoint ? { endpoint: aws.endpoint } : {}),
    ...(aws.credentials ? { credentials: aws.credentials } : {}),
  };
}

/**
 * The work queue (with its DLQ and the redrive the CDK stack sets) and the state table, as the
 * stack creates them: found when they exist, created when `create` allows it, else a clear error.
 */
export async function ensureQueueAndTable(
  aws: AwsAccess,
  names: { queueName: string; tableName: string },
  create: boolean,
): Promise<{ queueUrl: string; tableName: string; deadLetterQueueUrl?: string }> {
  const sqs = new SQSClient(clientConfig(aws));
  let queueUrl: string | undefined;
  try {
    queueUrl = (await sqs.send(new GetQueueUrlCommand({ QueueName: names.queueName }))).QueueUrl;
  } catch (error) {
    if (!(error instanceof QueueDoesNotExist)) throw error;
    if (!create) {
      throw new Error(`queue ${names.queueName} does not exist (use --create-resources)`, {
        cause: error,
      });
    }
    const dlq = await sqs.send(new CreateQueueCommand({ QueueName: `${names.queueName}-dlq` }));
    const dlqArn = (
      await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: dlq.QueueUrl, AttributeNames: ['QueueArn'] }),
      )
    ).Attributes?.QueueArn;
    queueUrl = (
      await sqs.send(
        new CreateQueueCommand({
          QueueName: names.queueName,
          Attributes: {
            VisibilityTimeout: '60',
            RedrivePolicy: JSON.stringify({
              deadLetterTargetArn: dlqArn,
              maxReceiveCount: resendAfterReceives + 2,
            }),
          },
        }),
      )
    ).QueueUrl;
  }
  await ensureTable(aws, names.tableName, create);
  // The DLQ by our naming, when there is one: messages that are not ours are parked there.
  const deadLetterQueueUrl = await sqs
    .send(new GetQueueUrlCommand({ QueueName: `${names.queueName}-dlq` }))
    .then((found) => found.QueueUrl)
    .catch((error: unknown) => {
      if (error instanceof QueueDoesNotExist) return undefined;
      throw error;
    });
  return {
    queueUrl: queueUrl ?? '',
    tableName: names.tableName,
    ...(deadLetterQueueUrl ? { deadLetterQueueUrl } : {}),
  };
}

/** The state table with the key layout of the StateStore: found, created, or a clear error. */
export async function ensureTable(
  aws: AwsAccess,
  tableName: string,
  create: boolean,
): Promise<void> {
  const ddb = new DynamoDBClient(clientConfig(aws));
  try {
    await ddb.send(new DescribeTableCommand({ TableName: tableName }));
  } catch (error) {
    if (!(error instanceof ResourceNotFoundException)) throw error;
    if (!create) {
      throw new Error(`table ${tableName} does not exist (use --create-resources)`, {
        cause: error,
      });
    }
    await ddb.send(
      new CreateTableCommand({
        TableName: tableName,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      }),
    );
  }
}

export interface SimulatedNetwork {
  readonly vpcId: string;
  readonly subnetIds: readonly string[];
  readonly backendSecurityGroupId: string;
  /** Starts EC2 instances in the simulated VPC; returns node names and providerIDs. */
  addInstances(count: number): Promise<{ name: string; providerID: string }[]>;
}

/**
 * In the emulator: a cluster VPC with two subnets in two zones tagged for both NLB roles, the
 * backend security group the stack would create, and instances to act as nodes.
 */
export async function createSimulatedNetwork(
  aws: AwsAccess,
  clusterName: string,
  ec2: EC2Client = new EC2Client(clientConfig(aws)),
): Promise<SimulatedNetwork> {
  const vpc = await ec2.send(new CreateVpcCommand({ CidrBlock: '10.0.0.0/16' }));
  const vpcId = vpc.Vpc?.VpcId ?? '';
  const subnetIds: string[] = [];
  for (const [i, zone] of [`${aws.region}a`, `${aws.region}b`].entries()) {
    const subnet = await ec2.send(
      new CreateSubnetCommand({
        VpcId: vpcId,
        CidrBlock: `10.0.${i + 1}.0/24`,
        AvailabilityZone: zone,
        TagSpecifications: [
          {
            ResourceType: 'subnet',
            Tags: [
              { Key: 'kubernetes.io/role/elb', Value: '1' },
              { Key: 'kubernetes.io/role/internal-elb', Value: '1' },
              { Key: `kubernetes.io/cluster/${clusterName}`, Value: 'shared' },
            ],
          },
        ],
      }),
    );
    subnetIds.push(subnet.Subnet?.SubnetId ?? '');
  }
  const backend = await ec2.send(
    new CreateSecurityGroupCommand({
      GroupName: `${clusterName}-nlb-backend`,
      Description: 'NLBs to nodes',
      VpcId: vpcId,
    }),
  );
  let started = 0;
  return {
    vpcId,
    subnetIds,
    backendSecurityGroupId: backend.GroupId ?? '',
    addInstances: async (count) => {
      const run = await ec2.send(
        new RunInstancesCommand({
          ImageId: 'ami-12c6146b',
          MinCount: count,
          MaxCount: count,
          SubnetId: subnetIds[started % 2],
        }),
      );
      return (run.Instances ?? []).map((instance) => {
        started++;
        const zone = instance.Placement?.AvailabilityZone ?? `${aws.region}a`;
        return {
          name: `node-${started}`,
          providerID: `aws:///${zone}/${instance.InstanceId ?? ''}`,
        };
      });
    },
  };
}
