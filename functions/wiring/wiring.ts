import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { EC2Client } from '@aws-sdk/client-ec2';
import { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { ResourceGroupsTaggingAPIClient } from '@aws-sdk/client-resource-groups-tagging-api';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { addRateLimits, countSentChanges, type Elbv2Budgets } from '../aws/clients';
import type { RegistrationBudgetSpec } from '../core/registration-slots';
import { changeBudgetPk, describeBudgetPk, registrationBudgetPk } from '../state/table-layout';
import { boundedRetry } from '../aws/bounded-retry';
import { callerRoleOption } from '../aws/caller-role';
import { DynamoStateStore } from '../state/dynamo-state-store';
import { EventBridgePublisher } from '../queue/eventbridge-publisher';
import { NlbProvider } from '../nlb/nlb-provider';
import {
  defaultChangeBudget,
  defaultDescribeBudget,
  defaultRegistrationBudget,
  RegistrationBudget,
  systemTimer,
  TatBudgetStore,
} from '../aws/registration-budget';
import { DynamoTatItem } from '../state/registration-budget-item';
import { SqsWorkQueue } from '../queue/sqs-work-queue';
import { TenantPolicyEnforcer } from '../nlb/tenant-policy-check';
import type { ControllerConfig } from '../contract/controller-config';
import { tenantPolicyWarnings } from '../contract/tenant-policy-config';
import { errorMessage, RequeueAfterError } from '../core/errors';
import { KubeEventRecorder } from '../kube/event-recorder';
import { HttpKubernetesApi } from '../kube/kubernetes-api';
import { kubernetesConnector } from '../kube/connect';
import type { Clock } from '../sync/ports';
import type {
  HandlerExecutionContext,
  InitializeHandler,
  InitializeHandlerArguments,
  MetadataBearer,
  MiddlewareStack,
} from '@smithy/types';
import type { RuntimeContext } from '../runtime/context';
import type { RuntimeLog, RuntimeMetrics } from '../runtime/ports';

/** Something with an SDK middleware stack: every client we create passes through `adaptClient`. */
type SdkClient =
  | ElasticLoadBalancingV2Client
  | EC2Client
  | ResourceGroupsTaggingAPIClient
  | SQSClient
  | DynamoDBClient
  | EventBridgeClient;

export interface RuntimeOptions {
  readonly clock?: Clock;
  readonly log?: RuntimeLog;
  readonly metrics?: RuntimeMetrics;
  /** Static credentials (local runs and tests); the default provider chain otherwise. */
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string };
  /** SDK attempts per call (default 5); tests lower it to keep injected faults quick. */
  readonly maxAttempts?: number;
  /** Lets tests and the local mode instrument every client (call counting, emulator accounts). */
  readonly adaptClient?: <C extends SdkClient>(client: C) => C;
}

const systemClock: Clock = { now: () => new Date() };

/**
 * The runtime as wired here: the context the handlers take, with its concrete adapters in view for
 * the operator tooling (local mode, uninstall) and tests, which read the table and AWS directly.
 */
export interface WiredRuntime extends RuntimeContext {
  readonly provider: NlbProvider;
  readonly store: DynamoStateStore;
}

/** Builds the runtime once per cold start: SDK clients, logger and metrics are reused across invocations. */
export function createRuntime(
  config: ControllerConfig,
  options: RuntimeOptions = {},
): WiredRuntime {
  const clock = options.clock ?? systemClock;
  const adapt = options.adaptClient ?? (<C extends SdkClient>(client: C) => client);
  const endpoints = config.aws.endpoints;
  const maxAttempts = options.maxAttempts ?? 5;
  const base = {
    region: config.region,
    ...callerRoleOption('functions'),
    ...(options.credentials ? { credentials: options.credentials } : {}),
  };
  // No client sleeps long between attempts (bounded-retry.ts); throttling of the AWS APIs whose
  // rate is ours to manage goes back to the queue instead of being retried in place.
  const handBackThrottling = () => boundedRetry(maxAttempts, 'handBack');
  const retryThrottling = (attempts = maxAttempts) => boundedRetry(attempts, 'retry');
  const elbv2 = adapt(
    new ElasticLoadBalancingV2Client({
      ...base,
      ...handBackThrottling(),
      ...(endpoints.elbv2 ? { endpoint: endpoints.elbv2 } : {}),
    }),
  );
  const dynamodb = adapt(
    new DynamoDBClient({
      ...base,
      ...retryThrottling(),
      ...(endpoints.dynamodb ? { endpoint: endpoints.dynamodb } : {}),
    }),
  );
  const doc = DynamoDBDocumentClient.from(dynamodb);
  addRateLimits(elbv2, elbv2BudgetsFor(config, doc));
  const ec2 = adapt(
    new EC2Client({
      ...base,
      ...handBackThrottling(),
      ...(endpoints.ec2 ? { endpoint: endpoints.ec2 } : {}),
    }),
  );
  countSentChanges(ec2);
  // Queue URLs carry a host, but the client needs its own endpoint (emulators, VPC endpoints).
  const sqs = adapt(
    new SQSClient({
      ...base,
      ...retryThrottling(),
      ...(endpoints.sqs ? { endpoint: endpoints.sqs } : {}),
    }),
  );

  const log = options.log ?? powertoolsLog();
  // Once per cold start (and at `npm start`): a policy that fails open is valid but worth a look.
  for (const warning of tenantPolicyWarnings(config.tenantPolicy)) log.warn(warning);
  const metrics = options.metrics ?? powertoolsMetrics(config.clusterName);
  for (const client of [elbv2, ec2, sqs, dynamodb]) countCalls(client, metrics);
  // Loaded when a deletion or the sweep first looks for tagged resources, not at cold start.
  const tagging = async () => {
    const { ResourceGroupsTaggingAPIClient } =
      await import('@aws-sdk/client-resource-groups-tagging-api');
    const client = adapt(
      new ResourceGroupsTaggingAPIClient({
        ...base,
        ...handBackThrottling(),
        ...(endpoints.tagging ? { endpoint: endpoints.tagging } : {}),
      }),
    );
    countCalls(client, metrics);
    return client;
  };
  // Loaded on the first event to publish, not at cold start.
  const eventBridge =
    config.lifecycleEvents === undefined
      ? undefined
      : async () => {
          const { EventBridgeClient } = await import('@aws-sdk/client-eventbridge');
          const client = adapt(
            new EventBridgeClient({
              ...base,
              // Publishing must not eat the sync's time budget: short timeouts, few attempts;
              // what does not get through goes back on the queue (lifecycle-feed.ts).
              ...retryThrottling(Math.min(maxAttempts, 2)),
              requestHandler: { connectionTimeout: 1000, requestTimeout: 3000 },
              ...(endpoints.events ? { endpoint: endpoints.events } : {}),
            }),
          );
          countCalls(client, metrics);
          return client;
        };
  const connect = kubernetesConnector(config, clock, { log });
  const claim = {
    loadBalancerClass: config.loadBalancerClass,
    claimClassless: config.claimClassless,
  };
  const store = new DynamoStateStore(doc, config.tableName, clock);
  const provider = new NlbProvider(
    { elbv2, ec2, tagging },
    {
      clusterName: config.clusterName,
      vpcId: config.aws.vpcId,
      backendSecurityGroupId: config.aws.backendSecurityGroupId,
      defaultScheme: config.aws.defaultScheme,
      defaultSslPolicy: config.aws.defaultSslPolicy,
      defaultTags: config.aws.defaultTags,
    },
    config.tenantPolicy &&
      new TenantPolicyEnforcer(config.tenantPolicy, claim, new HttpKubernetesApi(connect), store),
    { now: () => clock.now().getTime() },
  );
  let passes = 0;
  const instance = randomUUID().slice(0, 8);
  return {
    config,
    provider,
    store,
    queue: new SqsWorkQueue(sqs, config.queueUrl, config.deadLetterQueueUrl),
    nodeQueue: new SqsWorkQueue(
      sqs,
      config.nodeQueueUrl ?? config.queueUrl,
      config.deadLetterQueueUrl,
    ),
    separateNodeQueue: config.nodeQueueUrl !== undefined && config.nodeQueueUrl !== config.queueUrl,
    lifecycle:
      eventBridge &&
      new EventBridgePublisher(eventBridge, {
        busName: config.lifecycleEvents?.busName ?? 'default',
        onFailure: (rejected, reason) =>
          log.warn('EventBridge rejected lifecycle events', { rejected, reason }),
      }),
    log,
    metrics,
    newOwner: () => `${instance}-${++passes}`,
    syncDeps: {
      kube: new HttpKubernetesApi(connect),
      provider,
      events: new KubeEventRecorder(connect, clock, (error, event) =>
        log.warn('could not record an Event', { reason: event.reason, error: errorMessage(error) }),
      ),
      clock,
      claim,
      nodePolicy: config.nodePolicy,
    },
  };
}

/**
 * All instances share one budget per ELBv2 bucket on the state table (registrations, Describe*,
 * changes), each unless it is switched off (perSecond 0: the per-process limiter alone).
 */
function elbv2BudgetsFor(config: ControllerConfig, doc: DynamoDBDocumentClient): Elbv2Budgets {
  const budget = (spec: RegistrationBudgetSpec, pk: string, name: string, perNamespace = true) =>
    spec.perSecond <= 0
      ? undefined
      : // Wall-clock time, not the runtime's clock: AWS's bucket refills in real time.
        new RegistrationBudget(
          new TatBudgetStore(new DynamoTatItem(doc, config.tableName, pk), () =>
            systemTimer.nowMs(),
          ),
          spec,
          systemTimer,
          { name, perNamespace },
        );
  return {
    registration: budget(
      config.registrationBudget ?? defaultRegistrationBudget,
      registrationBudgetPk,
      'ELBv2 registration budget',
    ),
    // First come, first served: a pass's reads are few and soon done, and a share on them
    // as well as on its changes held passes back twice over.
    describe: budget(
      config.describeBudget ?? defaultDescribeBudget,
      describeBudgetPk,
      'ELBv2 Describe budget',
      false,
    ),
    change: budget(
      config.changeBudget ?? defaultChangeBudget,
      changeBudgetPk,
      'ELBv2 change budget',
    ),
  };
}

/**
 * AWS calls by service and operation: what users pay for in throttling (docs/design.md §5). A
 * registration the shared budget turns away before its first attempt (RequeueAfterError, thrown
 * before the request is sent) is not a call.
 */
export function countCalls(client: SdkClient, metrics: RuntimeMetrics): void {
  const stack = client.middlewareStack as unknown as MiddlewareStack<object, MetadataBearer>;
  stack.add(
    (next: InitializeHandler<object, MetadataBearer>, context: HandlerExecutionContext) =>
      async (args: InitializeHandlerArguments<object>) => {
        const service = (context.clientName ?? '').replace(/Client$/, '');
        const operation = (context.commandName ?? '').replace(/Command$/, '');
        // Not `service`: that is Powertools' default dimension, and overriding it logs two
        // plain-text warnings per call.
        const count = () => metrics.count('AwsCalls', 1, { awsService: service, operation });
        try {
          const result = await next(args);
          count();
          return result;
        } catch (error) {
          // The SDK's retries run the budget again on each attempt: a refusal after a sent
          // attempt (throttled, say) still made a call.
          const attempts = (error as { $metadata?: { attempts?: number } }).$metadata?.attempts;
          if (!(error instanceof RequeueAfterError) || (attempts ?? 1) > 1) count();
          throw error;
        }
      },
    { step: 'initialize', name: 'countAwsCalls' },
  );
}

/** One JSON logger for the functions' own lines and for what Powertools Metrics has to say. */
const logger = new Logger({ serviceName: 'serverless-service-controller' });

export function powertoolsLog(): RuntimeLog {
  return {
    info: (message, fields) => logger.info(message, fields ?? {}),
    warn: (message, fields) => logger.warn(message, fields ?? {}),
    error: (message, fields) => logger.error(message, fields ?? {}),
  };
}

/**
 * EMF through Powertools; the handler flushes after each invocation. Its default dimensions are
 * `service=controller` and, from `powertoolsMetrics`, the cluster: the alarms and dashboard read
 * both (infra/monitoring.ts).
 */
export const metricsPublisher = new Metrics({
  namespace: 'ServerlessServiceController',
  serviceName: 'controller',
  logger,
});

/** After each invocation: publishes what was counted; an invocation that counted nothing is quiet. */
export function flushMetrics(): void {
  if (metricsPublisher.hasStoredMetrics()) metricsPublisher.publishStoredMetrics();
}

let clusterDimension: string | undefined;

/**
 * Every metric carries the cluster, so that two controllers in one account and Region keep apart:
 * without it one cluster's heartbeats would keep the other's ForwarderQuiet alarm green, and its
 * permission failures would page the other's owners. One dimension more per metric, not more
 * metrics per cluster.
 */
export function powertoolsMetrics(clusterName: string): RuntimeMetrics {
  // Only when it changes: Powertools warns at every overwrite of a default, even by its own value.
  if (clusterDimension !== clusterName) {
    metricsPublisher.clearDefaultDimensions();
    metricsPublisher.setDefaultDimensions({ service: 'controller', cluster: clusterName });
    clusterDimension = clusterName;
  }
  return {
    count: (name, value = 1, dimensions) => {
      if (dimensions === undefined) {
        metricsPublisher.addMetric(name, MetricUnit.Count, value);
        return;
      }
      const single = metricsPublisher.singleMetric();
      for (const [key, dimension] of Object.entries(dimensions))
        single.addDimension(key, dimension);
      single.addMetric(name, MetricUnit.Count, value);
    },
    milliseconds: (name, value) => metricsPublisher.addMetric(name, MetricUnit.Milliseconds, value),
  };
}
