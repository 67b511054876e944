import { DescribeTargetHealthCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { CoreV1Api } from '@kubernetes/client-node';
import type { FinalizeHandler, FinalizeHandlerArguments, MetadataBearer } from '@smithy/types';
import { readNlbState } from '../../functions/nlb/nlb-state';
import { parseConfig, type ControllerConfig } from '../../functions/contract/controller-config';
import type { Host } from '../../functions/core/hosts';
import type { WiredRuntime } from '../../functions/wiring/wiring';
import type { RuntimeLog, RuntimeMetrics } from '../../functions/runtime/ports';
import type { WorkMessage } from '../../functions/contract/work-messages';
import { processWorkBatch } from '../../functions/runtime/work-batch';
import { resendAfterReceives } from '../../functions/contract/queue-limits';
import { type BatchResult, type QueueRecord } from '../../functions/runtime/queue-records';
import { processNodeBatch } from '../../functions/runtime/node-messages';
import { createRuntime } from '../../functions/wiring/wiring';
import { createAwsCluster, type AwsCluster } from '../../kit/aws-cluster';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import { loadProjectRbac, type ProjectRbac } from '../../functions/local/project-rbac';
import type { InstrumentableClient } from '../../kit/aws-calls';
import { loadBalancerService } from './kube-objects';
import { MotoAccount } from '../../kit/moto';

export class RecordingLog implements RuntimeLog {
  /** `at`: when it was logged (epoch ms), for a failure's trace. */
  readonly lines: {
    level: string;
    message: string;
    fields: Record<string, unknown>;
    at: number;
  }[] = [];
  info(message: string, fields: Record<string, unknown> = {}) {
    this.lines.push({ level: 'info', message, fields, at: Date.now() });
  }
  warn(message: string, fields: Record<string, unknown> = {}) {
    this.lines.push({ level: 'warn', message, fields, at: Date.now() });
  }
  error(message: string, fields: Record<string, unknown> = {}) {
    this.lines.push({ level: 'error', message, fields, at: Date.now() });
  }
}

export class RecordingMetrics implements RuntimeMetrics {
  readonly counts = new Map<string, number>();
  count(name: string, value = 1, dimensions?: Record<string, string>) {
    const key = dimensions
      ? `${name}{${Object.entries(dimensions)
          .map(([k, v]) => `${k}=${v}`)
          .join(',')}}`
      : name;
    this.counts.set(key, (this.counts.get(key) ?? 0) + value);
  }
  milliseconds() {}
  get(name: string): number {
    return this.counts.get(name) ?? 0;
  }
}

/**
 * The whole controller on one machine, with real parts: moto for SQS, DynamoDB, ELBv2 and EC2 in a
 * private account, the fake Kubernetes API server over HTTP, and the real runtime built from a
 * validated configuration. Messages are received from the real queue; `handleOnce` deletes what
 * the handler acknowledged and leaves reported failures to come back, as the event source mapping does.
 */
export interface RuntimeWorld {
  readonly account: MotoAccount;
  readonly aws: AwsCluster;
  readonly kube: FakeKubeApiServer;
  /** The test's own client: the cluster's admin, beyond RBAC. */
  readonly api: CoreV1Api;
  /** The manifests' RBAC the API server enforces, and the functions' and forwarder's identities. */
  readonly rbac: ProjectRbac | undefined;
  readonly runtime: WiredRuntime;
  readonly config: ControllerConfig;
  readonly log: RecordingLog;
  readonly metrics: RecordingMetrics;
  readonly sqs: SQSClient;
  send(message: WorkMessage | string): Promise<void>;
  /** Sends to the node queue (the work queue when there is none), as the forwarder does. */
  sendToNodeQueue(message: WorkMessage | string): Promise<void>;
  /**
   * Creates a LoadBalancer Service in `default` (with these annotations), sends its key and
   * drains both queues: a Service the controller has synced.
   */
  createService(name?: string, annotations?: Record<string, string>): Promise<void>;
  /** A Ready Node for `host`, or for a new EC2 instance when none is given. */
  addNode(host?: Host): Promise<Host>;
  receive(waitSeconds?: number): Promise<QueueRecord[]>;
  handle(records: QueueRecord[]): Promise<BatchResult>;
  /** Receives one batch (waiting up to `waitSeconds`) and handles it. */
  handleOnce(waitSeconds?: number): Promise<{ records: QueueRecord[]; result: BatchResult }>;
  /** The node queue, when the world has one (the default). */
  readonly nodeQueueUrl: string | undefined;
  /** Receives one batch from the node queue and hands it to the node-sync function's handler. */
  handleNodesOnce(waitSeconds?: number): Promise<{ records: QueueRecord[]; result: BatchResult }>;
  /** What the dead-letter queue holds: bodies and their `problem` attribute (received, not deleted). */
  deadLetters(): Promise<{ body: string; problem: string | undefined }[]>;
  /** Handles batches (both queues) until they stay empty for `quietSeconds`. */
  drain(quietSeconds?: number): Promise<void>;
  /** The work queue's depth, or the node queue's (the work queue's when there is none). */
  queueDepth(
    queue?: 'work' | 'nodes',
  ): Promise<{ visible: number; inFlight: number; delayed: number }>;
  /** Receives from the node queue (the work queue when there is none). */
  receiveNodes(waitSeconds?: number): Promise<QueueRecord[]>;
  /** Hands records of the node queue to the node-sync function's handler, as its event source does. */
  handleNodes(records: QueueRecord[]): Promise<BatchResult>;
  /**
   * Another function instance on the same queues, table, cluster and account: its own runtime
   * and SDK clients, each passed through `adapt` after the world's own instrumentation (a crash
   * after the k-th AWS call, say).
   */
  startInstance(adapt: <C extends InstrumentableClient>(client: C) => C): WiredRuntime;
  /** Stops the API server; fails if it refused any request (a call outside the manifests' RBAC). */
  stop(): Promise<void>;
}

export interface RuntimeWorldOptions {
  /**
   * Enforce infra/k8s's RBAC, with the runtime authenticated as the functions (default true): a
   * Kubernetes call the ClusterRole does not grant gets 403 and fails the test at `stop()`.
   */
  readonly rbac?: boolean;
  /**
   * Give node messages a queue of their own, consumed by the node-sync function's batch handler,
   * as the stack does (default true); false: one queue for all, as local mode and 0.1 configs.
   */
  readonly nodeQueue?: boolean;
}

/**
 * DynamoDB applies a conditional write atomically; moto's threaded server does not, so two
 * concurrent lease acquisitions can both succeed there. Sending the runtime's DynamoDB requests
 * one at a time gives the emulator DynamoDB's atomicity (the lease logic itself is what is tested).
 */
function oneAtATime<C extends DynamoDBClient>(client: C): C {
  let last: Promise<unknown> = Promise.resolve();
  client.middlewareStack.add(
    (next: FinalizeHandler<object, MetadataBearer>) => (args: FinalizeHandlerArguments<object>) => {
      const run = last.then(
        () => next(args),
        () => next(args),
      );
      last = run.catch(() => undefined);
      return run;
    },
    { step: 'finalizeRequest', name: 'dynamoOneAtATime' },
  );
  return client;
}

export async function createRuntimeWorld(
  overrides: Partial<ControllerConfig> = {},
  options: RuntimeWorldOptions = {},
): Promise<RuntimeWorld> {
  const account = new MotoAccount();
  const aws = await createAwsCluster(3, undefined, account);
  const endpoint = account.config.endpoint;
  const sqs = account.client(SQSClient);
  // The DLQ as the stack makes it: the receive limit a little past the resend limit.
  const dlq = await sqs.send(new CreateQueueCommand({ QueueName: 'work-dlq' }));
  const dlqArn = (
    await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: dlq.QueueUrl, AttributeNames: ['QueueArn'] }),
    )
  ).Attributes?.QueueArn;
  const queue = await sqs.send(
    new CreateQueueCommand({
      QueueName: 'work',
      Attributes: {
        VisibilityTimeout: '30',
        RedrivePolicy: JSON.stringify({
          deadLetterTargetArn: dlqArn,
          maxReceiveCount: resendAfterReceives + 2,
        }),
      },
    }),
  );
  const nodeQueue =
    options.nodeQueue === false
      ? undefined
      : await sqs.send(
          new CreateQueueCommand({
            QueueName: 'nodes',
            Attributes: {
              VisibilityTimeout: '30',
              RedrivePolicy: JSON.stringify({
                deadLetterTargetArn: dlqArn,
                maxReceiveCount: resendAfterReceives + 2,
              }),
            },
          }),
        );
  const ddb = account.client(DynamoDBClient);
  await ddb.send(
    new CreateTableCommand({
      TableName: 'state',
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    }),
  );
  const rbac = options.rbac === false ? undefined : loadProjectRbac();
  const kube = await FakeKubeApiServer.start(rbac ? { rbac: rbac.authorizer } : {});
  const dir = mkdtempSync(join(tmpdir(), 'ssc-'));
  const kubeconfigPath = join(dir, 'kubeconfig');
  writeFileSync(kubeconfigPath, kube.kubeconfigText(rbac ? { as: rbac.functions } : {}));
  const createNode = (host: Host) =>
    kube.store.create('nodes', '', {
      metadata: { name: host.name },
      spec: { providerID: host.providerID },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    });
  for (const host of aws.hosts) createNode(host);
  const config = parseConfig({
    clusterName: aws.settings.clusterName,
    region: 'us-east-1',
    claimClassless: true,
    queueUrl: queue.QueueUrl,
    ...(nodeQueue ? { nodeQueueUrl: nodeQueue.QueueUrl } : {}),
    deadLetterQueueUrl: dlq.QueueUrl,
    tableName: 'state',
    backoffBaseSeconds: 1,
    leaseSeconds: 30,
    orphanGraceSeconds: 0,
    // Tests change nodes a second apart and drain with a one-second quiet period; the interval
    // that folds node floods together has its own tests (forged-messages.test.ts).
    nodeSyncMinIntervalSeconds: 0,
    aws: {
      vpcId: aws.vpcId,
      backendSecurityGroupId: aws.settings.backendSecurityGroupId,
      endpoints: {
        elbv2: endpoint,
        ec2: endpoint,
        tagging: endpoint,
        sqs: endpoint,
        dynamodb: endpoint,
        events: endpoint,
      },
    },
    kubernetes: { mode: 'kubeconfig', path: kubeconfigPath },
    ...overrides,
  });
  const log = new RecordingLog();
  const metrics = new RecordingMetrics();
  const startInstance = (adapt: <C extends InstrumentableClient>(client: C) => C) =>
    createRuntime(config, {
      credentials: account.config.credentials,
      maxAttempts: 2,
      log,
      metrics,
      adaptClient: (client) =>
        client instanceof DynamoDBClient
          ? oneAtATime(adapt(aws.recorder.attach(account.bind(client))))
          : adapt(aws.recorder.attach(account.bind(client))),
    });
  const runtime = startInstance((client) => client);
  const queueUrl = queue.QueueUrl ?? '';
  const nodeQueueUrl = nodeQueue?.QueueUrl;
  const receiveFrom = async (url: string, waitSeconds: number): Promise<QueueRecord[]> => {
    const received = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: waitSeconds,
        MessageSystemAttributeNames: ['ApproximateReceiveCount'],
      }),
    );
    return (received.Messages ?? []).map((m) => ({
      messageId: m.MessageId ?? '',
      body: m.Body ?? '',
      receiptHandle: m.ReceiptHandle ?? '',
      receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? '1'),
    }));
  };
  // As the event source mapping does: delete what the handler did not report as failed.
  const acknowledge = async (url: string, records: QueueRecord[], result: BatchResult) => {
    const failed = new Set(result.batchItemFailures.map((f) => f.itemIdentifier));
    for (const record of records) {
      if (!failed.has(record.messageId)) {
        await sqs.send(
          new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: record.receiptHandle }),
        );
      }
    }
  };

  const world: RuntimeWorld = {
    account,
    aws,
    kube,
    api: kube.kubeConfig().makeApiClient(CoreV1Api),
    rbac,
    runtime,
    config,
    log,
    metrics,
    sqs,
    addNode: async (host) => {
      const node = host ?? (await aws.addHosts(1))[0]!;
      createNode(node);
      return node;
    },
    send: async (message) => {
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: queueUrl,
          MessageBody: typeof message === 'string' ? message : JSON.stringify(message),
        }),
      );
    },
    sendToNodeQueue: async (message) => {
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: nodeQueueUrl ?? queueUrl,
          MessageBody: typeof message === 'string' ? message : JSON.stringify(message),
        }),
      );
    },
    createService: async (name = 'web', annotations = {}) => {
      const body = loadBalancerService(name);
      if (Object.keys(annotations).length > 0) body.metadata = { ...body.metadata, annotations };
      await world.api.createNamespacedService({ namespace: 'default', body });
      await world.send({ v: 1, kind: 'service', key: `default/${name}` });
      await world.drain();
    },
    receive: (waitSeconds = 0) => receiveFrom(queueUrl, waitSeconds),
    handle: async (records) => {
      const result = await processWorkBatch(records, runtime);
      await acknowledge(queueUrl, records, result);
      // The node-sync function consumes the node queue at the same time: what this batch moved
      // there (a node message sent to the work queue) is handled before the test looks.
      if (nodeQueueUrl !== undefined) await world.handleNodesOnce(0);
      return result;
    },
    handleOnce: async (waitSeconds = 1) => {
      const records = await world.receive(waitSeconds);
      const result = records.length > 0 ? await world.handle(records) : { batchItemFailures: [] };
      return { records, result };
    },
    nodeQueueUrl,
    receiveNodes: (waitSeconds = 0) => receiveFrom(nodeQueueUrl ?? queueUrl, waitSeconds),
    handleNodes: async (records) => {
      if (nodeQueueUrl === undefined) return world.handle(records);
      const result = await processNodeBatch(records, runtime);
      await acknowledge(nodeQueueUrl, records, result);
      return result;
    },
    handleNodesOnce: async (waitSeconds = 0) => {
      if (nodeQueueUrl === undefined) return { records: [], result: { batchItemFailures: [] } };
      const records = await receiveFrom(nodeQueueUrl, waitSeconds);
      if (records.length === 0) return { records, result: { batchItemFailures: [] } };
      return { records, result: await world.handleNodes(records) };
    },
    drain: async (quietSeconds = 1) => {
      for (let rounds = 0; rounds < 50; rounds++) {
        const nodes = await world.handleNodesOnce(0);
        const { records } = await world.handleOnce(quietSeconds);
        if (records.length === 0 && nodes.records.length === 0) {
          // Node messages that became visible while the work queue was quiet.
          if ((await world.handleNodesOnce(0)).records.length === 0) return;
        }
      }
      throw new Error('the queues did not drain in 50 rounds');
    },
    queueDepth: async (queue = 'work') => {
      const attributes = await sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: queue === 'nodes' ? (nodeQueueUrl ?? queueUrl) : queueUrl,
          AttributeNames: [
            'ApproximateNumberOfMessages',
            'ApproximateNumberOfMessagesNotVisible',
            'ApproximateNumberOfMessagesDelayed',
          ],
        }),
      );
      const a = attributes.Attributes ?? {};
      return {
        visible: Number(a.ApproximateNumberOfMessages ?? 0),
        inFlight: Number(a.ApproximateNumberOfMessagesNotVisible ?? 0),
        delayed: Number(a.ApproximateNumberOfMessagesDelayed ?? 0),
      };
    },
    deadLetters: async () => {
      const received = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: dlq.QueueUrl,
          MaxNumberOfMessages: 10,
          VisibilityTimeout: 0,
          MessageAttributeNames: ['All'],
        }),
      );
      return (received.Messages ?? []).map((m) => ({
        body: m.Body ?? '',
        problem: m.MessageAttributes?.problem?.StringValue,
      }));
    },
    startInstance,
    stop: async () => {
      await kube.stop();
      rmSync(dir, { recursive: true, force: true });
      if (kube.denials.length > 0) {
        throw new Error(
          `the API server refused ${kube.denials.length} request(s) under infra/k8s RBAC:\n${kube.denials
            .map((d) => `  ${d.method} ${d.request.path}: ${d.message}`)
            .join('\n')}`,
        );
      }
    },
  };
  return world;
}

/** The instance IDs registered in each of a Service's target groups (as AWS reports them). */
export async function targetsOf(world: RuntimeWorld, key: string): Promise<string[][]> {
  const record = await world.runtime.store.getService(key);
  const groups = Object.values(readNlbState(record?.provider).targetGroups ?? {});
  const result: string[][] = [];
  for (const group of groups) {
    const health = await world.aws.testClients.elbv2.send(
      new DescribeTargetHealthCommand({ TargetGroupArn: group.arn }),
    );
    result.push((health.TargetHealthDescriptions ?? []).map((d) => d.Target?.Id ?? '').sort());
  }
  return result;
}
