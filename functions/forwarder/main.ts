import { SQSClient } from '@aws-sdk/client-sqs';
import { SqsWorkQueue } from '../queue/sqs-work-queue';
import { callerRoleOption } from '../aws/caller-role';
import { forwarderConfigFromEnvironment } from './config';
import { Forwarder } from './forwarder';
import { InClusterConnection } from '../kube/in-cluster';
import { sendByKind } from './queue-routing';

/** The forwarder process: the Pod's ServiceAccount, SQS from Pod Identity / IRSA, stop on SIGTERM. */
function log(
  level: 'info' | 'warn' | 'error',
  message: string,
  fields: Record<string, unknown> = {},
): void {
  process.stdout.write(
    `${JSON.stringify({ level, message, time: new Date().toISOString(), ...fields })}\n`,
  );
}

const config = forwarderConfigFromEnvironment(process.env);
const kubeConfig = new InClusterConnection(process.env);
const sqs = new SQSClient({
  region: config.region,
  ...callerRoleOption('forwarder'),
  ...(config.sqsEndpoint ? { endpoint: config.sqsEndpoint } : {}),
});
const queue = new SqsWorkQueue(sqs, config.queueUrl);
const nodeQueue =
  config.nodeQueueUrl === undefined ? undefined : new SqsWorkQueue(sqs, config.nodeQueueUrl);
const forwarder = new Forwarder({
  kubeConfig,
  claim: { loadBalancerClass: config.loadBalancerClass, claimClassless: config.claimClassless },
  nodePolicy: config.nodePolicy,
  send: sendByKind(queue, nodeQueue),
  bufferCapacity: config.bufferCapacity,
  heartbeatSeconds: config.heartbeatSeconds,
  unhealthyAfterSeconds: config.unhealthyAfterSeconds,
  unhealthyAfterWatchFailures: config.unhealthyAfterWatchFailures,
  log,
});
let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    log('info', 'stopping: delivering what is pending', {
      signal,
      pending: forwarder.publisher.depth,
    });
    void forwarder.stop().then((left) => {
      log(left === 0 ? 'info' : 'error', 'stopped', { undelivered: left });
      process.exit(left === 0 ? 0 : 1);
    });
  });
}

forwarder.start();
const port = await forwarder.listen(config.port);
log('info', 'forwarder started', {
  port,
  queueUrl: config.queueUrl,
  nodeQueueUrl: config.nodeQueueUrl,
  loadBalancerClass: config.loadBalancerClass,
});
