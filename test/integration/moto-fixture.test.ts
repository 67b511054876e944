import {
  CreateTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import {
  CreateSubnetCommand,
  CreateVpcCommand,
  EC2Client,
  RunInstancesCommand,
} from '@aws-sdk/client-ec2';
import {
  CreateLoadBalancerCommand,
  CreateTargetGroupCommand,
  DescribeLoadBalancersCommand,
  DescribeTargetGroupsCommand,
  ElasticLoadBalancingV2Client,
  RegisterTargetsCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import {
  CreateQueueCommand,
  GetQueueUrlCommand,
  ListQueuesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { AwsCallRecorder } from '../../kit/aws-calls';
import { MotoAccount } from '../../kit/moto';
import { callerRoleOption } from '../../functions/aws/caller-role';
import { callLogDirectory, readCallLog } from '../support/iam/call-log';

describe('moto fixture', () => {
  it('serves SQS: create a queue, send and receive a message', async () => {
    const sqs = new MotoAccount().client(SQSClient);
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: 'work' }));
    await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: '{"key":"default/a"}' }));
    const received = await sqs.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 0 }));
    expect(received.Messages?.map((m) => m.Body)).toEqual(['{"key":"default/a"}']);
  });

  it('serves DynamoDB: create a table, put and get an item', async () => {
    const ddb = new MotoAccount().client(DynamoDBClient);
    await ddb.send(
      new CreateTableCommand({
        TableName: 'state',
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      }),
    );
    await ddb.send(
      new PutItemCommand({ TableName: 'state', Item: { pk: { S: 'default/a' }, n: { N: '1' } } }),
    );
    const { Item } = await ddb.send(
      new GetItemCommand({ TableName: 'state', Key: { pk: { S: 'default/a' } } }),
    );
    expect(Item?.n).toEqual({ N: '1' });
  });

  it('serves EC2 and ELBv2: an NLB with a target group and an instance target', async () => {
    const account = new MotoAccount();
    const ec2 = account.client(EC2Client);
    const elb = account.client(ElasticLoadBalancingV2Client);
    const { Vpc } = await ec2.send(new CreateVpcCommand({ CidrBlock: '10.0.0.0/16' }));
    const { Subnet } = await ec2.send(
      new CreateSubnetCommand({
        VpcId: Vpc?.VpcId,
        CidrBlock: '10.0.1.0/24',
        AvailabilityZone: 'us-east-1a',
      }),
    );
    const { Instances } = await ec2.send(
      new RunInstancesCommand({
        ImageId: 'ami-12c6146b',
        MinCount: 1,
        MaxCount: 1,
        SubnetId: Subnet?.SubnetId,
      }),
    );
    const { LoadBalancers } = await elb.send(
      new CreateLoadBalancerCommand({
        Name: 'nlb-a',
        Type: 'network',
        Subnets: [Subnet?.SubnetId ?? ''],
      }),
    );
    const { TargetGroups } = await elb.send(
      new CreateTargetGroupCommand({
        Name: 'tg-a-80',
        Protocol: 'TCP',
        Port: 30080,
        VpcId: Vpc?.VpcId,
        TargetType: 'instance',
      }),
    );
    await elb.send(
      new RegisterTargetsCommand({
        TargetGroupArn: TargetGroups?.[0]?.TargetGroupArn,
        Targets: [{ Id: Instances?.[0]?.InstanceId ?? '', Port: 30080 }],
      }),
    );
    const described = await elb.send(new DescribeLoadBalancersCommand({ Names: ['nlb-a'] }));
    expect(described.LoadBalancers?.[0]?.LoadBalancerArn).toBe(LoadBalancers?.[0]?.LoadBalancerArn);
    expect(described.LoadBalancers?.[0]?.Type).toBe('network');
  });

  it('isolates accounts: resources of one are invisible to another', async () => {
    const first = new MotoAccount().client(SQSClient);
    const second = new MotoAccount().client(SQSClient);
    await first.send(new CreateQueueCommand({ QueueName: 'only-in-first' }));
    const inFirst = await first.send(new ListQueuesCommand({}));
    const inSecond = await second.send(new ListQueuesCommand({}));
    expect(inFirst.QueueUrls?.some((u) => u.endsWith('/only-in-first'))).toBe(true);
    expect(inSecond.QueueUrls ?? []).toEqual([]);
  });
});

describe('AWS call recorder', () => {
  function instrumentedElb(maxAttempts = 3) {
    const recorder = new AwsCallRecorder();
    const elb = recorder.attach(
      new MotoAccount().client(ElasticLoadBalancingV2Client, { maxAttempts }),
    );
    return { recorder, elb };
  }

  // The operator's role: recorded, not evaluated (the stack grants no role to a probe queue).
  it('records each call under the role its client was built for, a plain client’s as the test’s', async () => {
    const dir = callLogDirectory();
    if (dir === undefined) return expect.fail('the integration project keeps no IAM call log');
    const account = new MotoAccount();
    const recorder = new AwsCallRecorder();
    const plain = recorder.attach(account.client(SQSClient));
    const operators = recorder.attach(account.client(SQSClient, callerRoleOption('operator')));
    const QueueName = `role-probe-${account.accountId}`;
    await plain.send(new CreateQueueCommand({ QueueName }));
    await operators.send(new GetQueueUrlCommand({ QueueName }));
    await plain.send(new GetQueueUrlCommand({ QueueName }));
    const mine = readCallLog(dir).calls.filter(
      (c) => c.testFile === 'test/integration/moto-fixture.test.ts' && c.call === 'SQS.GetQueueUrl',
    );
    expect(mine.map((c) => c.identity).sort()).toEqual(['operator', 'test']);
  });

  it('counts calls per operation and service', async () => {
    const { recorder, elb } = instrumentedElb();
    await elb.send(new DescribeLoadBalancersCommand({}));
    await elb.send(new DescribeLoadBalancersCommand({}));
    await elb.send(new DescribeTargetGroupsCommand({}));
    expect(recorder.count('DescribeLoadBalancers')).toBe(2);
    expect(recorder.count('DescribeTargetGroups', 'ElasticLoadBalancingV2')).toBe(1);
    expect(recorder.count(undefined, 'EC2')).toBe(0);
    expect(recorder.byOperation()).toEqual({
      'ElasticLoadBalancingV2.DescribeLoadBalancers': 2,
      'ElasticLoadBalancingV2.DescribeTargetGroups': 1,
    });
  });

  it('injects throttling with the service error code; the SDK retries it and attempts are counted', async () => {
    const { recorder, elb } = instrumentedElb(3);
    recorder.injectFault({ operation: 'DescribeLoadBalancers', kind: 'throttle', times: 1 });
    await elb.send(new DescribeLoadBalancersCommand({}));
    expect(recorder.count('DescribeLoadBalancers')).toBe(1);
    expect(recorder.attempts.filter((a) => a.operation === 'DescribeLoadBalancers')).toHaveLength(
      2,
    );

    recorder.injectFault({ operation: 'DescribeLoadBalancers', kind: 'throttle' });
    const noRetry = recorder.attach(
      new MotoAccount().client(ElasticLoadBalancingV2Client, { maxAttempts: 1 }),
    );
    await expect(noRetry.send(new DescribeLoadBalancersCommand({}))).rejects.toMatchObject({
      name: 'Throttling',
      $metadata: { httpStatusCode: 400 },
    });
  });

  it('injects a 5xx server error only for the chosen operation', async () => {
    const { recorder, elb } = instrumentedElb(1);
    recorder.injectFault({ operation: 'DescribeTargetGroups', kind: 'server-error', times: 1 });
    await expect(elb.send(new DescribeLoadBalancersCommand({}))).resolves.toBeDefined();
    await expect(elb.send(new DescribeTargetGroupsCommand({}))).rejects.toMatchObject({
      $fault: 'server',
      $metadata: { httpStatusCode: 500 },
    });
    await expect(elb.send(new DescribeTargetGroupsCommand({}))).resolves.toBeDefined();
  });

  it('injects a timeout that the SDK classifies as transient and retries', async () => {
    const { recorder, elb } = instrumentedElb(2);
    recorder.injectFault({ operation: 'DescribeTargetGroups', kind: 'timeout', times: 1 });
    await elb.send(new DescribeTargetGroupsCommand({}));
    expect(recorder.attempts.filter((a) => a.operation === 'DescribeTargetGroups')).toHaveLength(2);

    recorder.injectFault({ operation: 'DescribeTargetGroups', kind: 'timeout', times: 2 });
    await expect(elb.send(new DescribeTargetGroupsCommand({}))).rejects.toMatchObject({
      name: 'TimeoutError',
    });
  });

  it('injects a chosen AWS error code', async () => {
    const { recorder, elb } = instrumentedElb(3);
    recorder.injectFault({
      operation: 'DescribeTargetGroups',
      kind: 'error',
      code: 'ResourceInUse',
      times: 1,
    });
    await expect(elb.send(new DescribeTargetGroupsCommand({}))).rejects.toMatchObject({
      name: 'ResourceInUse',
      $metadata: { httpStatusCode: 400 },
    });
    expect(recorder.attempts.filter((a) => a.operation === 'DescribeTargetGroups')).toHaveLength(1);
  });

  it('injects latency', async () => {
    const { recorder, elb } = instrumentedElb();
    recorder.injectFault({
      operation: 'DescribeLoadBalancers',
      kind: 'latency',
      latencyMs: 200,
      times: 1,
    });
    const started = performance.now();
    await elb.send(new DescribeLoadBalancersCommand({}));
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
  });
});
