import { Duration } from 'aws-cdk-lib';
import {
  Alarm,
  AlarmStatusWidget,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  MathExpression,
  Metric,
  TreatMissingData,
  type IMetric,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { Topic } from 'aws-cdk-lib/aws-sns';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

/** The functions' EMF namespace and default dimension (functions/runtime/wiring.ts). */
export const metricsNamespace = 'ServerlessServiceController';
const serviceDimension = { service: 'controller' };

export interface ControllerMonitoringProps {
  readonly queue: IQueue;
  /** Node changes and the node-sync timer's ticks (node-sync consumes it). */
  readonly nodeQueue: IQueue;
  readonly deadLetterQueue: IQueue;
  readonly functions: { serviceSync: IFunction; nodeSync: IFunction; sweep: IFunction };
  readonly alarmTopicArn?: string;
  readonly dashboardName: string;
  /** The sweep's period: it publishes the failing-Services gauge once per run. */
  readonly sweepPeriodMinutes: number;
  /** Oldest message age that pages someone; backoff keeps messages up to 5 minutes by design. */
  readonly oldestMessageAlarmSeconds?: number;
  /**
   * Oldest node message age that pages someone: longer than the timer tick's delay (the node-sync
   * period) and than one failed delivery's visibility timeout.
   */
  readonly nodeBacklogAlarmSeconds: number;
}

/** One dashboard and the alarms docs/operations.md explains, optionally notifying an SNS topic. */
export class ControllerMonitoring extends Construct {
  readonly dashboard: Dashboard;
  readonly alarms: Alarm[] = [];

  constructor(scope: Construct, id: string, props: ControllerMonitoringProps) {
    super(scope, id);
    const { queue, nodeQueue, deadLetterQueue, functions } = props;
    const fns = Object.entries(functions);
    const period = Duration.minutes(1);
    const custom = (metricName: string, statistic: string, label?: string) =>
      new Metric({
        namespace: metricsNamespace,
        metricName,
        dimensionsMap: serviceDimension,
        statistic,
        period,
        ...(label ? { label } : {}),
      });
    const search = (expression: string, label: string) =>
      new MathExpression({ expression, label, period, usingMetrics: {} });

    const alarm = (
      name: string,
      metric: IMetric,
      threshold: number,
      description: string,
      evaluationPeriods = 1,
      when: { below?: boolean; missingBreaches?: boolean } = {},
    ) => {
      const created = new Alarm(this, name, {
        metric,
        threshold,
        evaluationPeriods,
        comparisonOperator: when.below
          ? ComparisonOperator.LESS_THAN_THRESHOLD
          : ComparisonOperator.GREATER_THAN_THRESHOLD,
        treatMissingData: when.missingBreaches
          ? TreatMissingData.BREACHING
          : TreatMissingData.NOT_BREACHING,
        alarmDescription: `${description} See docs/operations.md#${name.toLowerCase()}.`,
      });
      this.alarms.push(created);
      return created;
    };
    alarm(
      'DeadLetters',
      deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum' }),
      0,
      'A work or node message failed every delivery and is parked in the DLQ.',
    );
    alarm(
      'OldestMessage',
      queue.metricApproximateAgeOfOldestMessage({ period, statistic: 'Maximum' }),
      props.oldestMessageAlarmSeconds ?? 900,
      'Work has waited longer than backoff explains: syncs are stuck or throttled.',
    );
    // Node messages see no backoff: only the timer's tick is delayed, and a failed delivery comes
    // back after the visibility timeout; one older than both means node sync is not consuming.
    alarm(
      'NodeBacklog',
      nodeQueue.metricApproximateAgeOfOldestMessage({ period, statistic: 'Maximum' }),
      props.nodeBacklogAlarmSeconds,
      'A node message has waited longer than the node-sync period: node changes do not reach the load balancers.',
    );
    // FILL: a function that did not run in a period has no datapoint, which would blank the sum.
    const total = (label: string, metric: (fn: IFunction) => IMetric) =>
      new MathExpression({
        expression: fns.map((_, i) => `FILL(m${i}, 0)`).join('+'),
        usingMetrics: Object.fromEntries(fns.map(([, fn], i) => [`m${i}`, metric(fn)])),
        label,
        period,
      });
    alarm(
      'FunctionErrors',
      total('function errors', (fn) => fn.metricErrors({ period, statistic: 'Sum' })),
      0,
      'A controller function failed (not a sync outcome: a crash or timeout).',
    );
    alarm(
      'Throttles',
      total('function throttles', (fn) => fn.metricThrottles({ period, statistic: 'Sum' })),
      0,
      'Lambda throttled a controller function (account concurrency).',
    );
    // Failures that retrying alone never fixes: someone must raise a quota or fix a policy.
    const fiveMinutes = Duration.minutes(5);
    const failuresOf = (failureClass: string) =>
      new Metric({
        namespace: metricsNamespace,
        metricName: 'RetryableFailures',
        dimensionsMap: { ...serviceDimension, class: failureClass },
        statistic: 'Sum',
        period: fiveMinutes,
      });
    alarm(
      'PermissionFailures',
      failuresOf('permission'),
      0,
      'AWS or Kubernetes refused the controller (AccessDenied, UnauthorizedOperation, 401, 403): Services wait until the policy or RBAC is fixed.',
    );
    alarm(
      'QuotaFailures',
      failuresOf('quota'),
      0,
      'An AWS quota is exhausted (TooManyLoadBalancers, TooManyTargets, SecurityGroupLimitExceeded, ...): Services wait until it is raised.',
    );
    alarm(
      'CapacityFailures',
      failuresOf('capacity'),
      0,
      'AWS lacks capacity or free addresses in a subnet for a load balancer.',
    );
    alarm(
      'DependencyFailures',
      failuresOf('dependency'),
      0,
      'Something a load balancer needs has been missing for 15 minutes (a certificate, a tagged subnet, a security group).',
      3,
    );
    const countOf = (metricName: string) =>
      new Metric({
        namespace: metricsNamespace,
        metricName,
        dimensionsMap: serviceDimension,
        statistic: 'Sum',
        period: fiveMinutes,
      });
    alarm(
      'UnexpectedFailures',
      countOf('UnexpectedFailures'),
      0,
      'A sync hit a bug or the state table failed.',
    );
    alarm(
      'NodeSyncFailures',
      countOf('NodeSyncFailures'),
      0,
      'Node sync has failed for 15 minutes: node changes do not reach the load balancers.',
      3,
    );
    alarm(
      'FailingServices',
      new Metric({
        namespace: metricsNamespace,
        metricName: 'FailingServices',
        dimensionsMap: serviceDimension,
        statistic: 'Maximum',
        // One value per sweep: a period as long as the sweep's always holds one.
        period: Duration.minutes(props.sweepPeriodMinutes),
      }),
      0,
      'Services whose syncs have failed for more than 15 minutes, as the last sweep counted them.',
    );
    // The forwarder sends a heartbeat a minute; ten minutes without one (no datapoint at all is
    // the usual shape of it) means no Service or Node change reaches the functions.
    alarm(
      'ForwarderQuiet',
      countOf('ForwarderHeartbeats'),
      1,
      'No heartbeat from the in-cluster forwarder for 10 minutes: changes in the cluster do not reach the controller.',
      2,
      { below: true, missingBreaches: true },
    );
    if (props.alarmTopicArn !== undefined) {
      const topic = Topic.fromTopicArn(this, 'AlarmTopic', props.alarmTopicArn);
      for (const created of this.alarms) {
        created.addAlarmAction(new SnsAction(topic));
        created.addOkAction(new SnsAction(topic));
      }
    }

    const perFunction = (metric: (fn: IFunction) => IMetric) => fns.map(([, fn]) => metric(fn));
    this.dashboard = new Dashboard(this, 'Dashboard', {
      dashboardName: props.dashboardName,
      defaultInterval: Duration.hours(3),
    });
    this.dashboard.addWidgets(
      new AlarmStatusWidget({ title: 'Alarms', alarms: this.alarms, width: 24, height: 3 }),
    );
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Work queue',
        left: [
          queue.metricApproximateNumberOfMessagesVisible({ period, label: 'visible' }),
          queue.metricApproximateNumberOfMessagesNotVisible({
            period,
            label: 'in flight / backing off',
          }),
          deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period, label: 'DLQ' }),
        ],
        right: [queue.metricApproximateAgeOfOldestMessage({ period, label: 'oldest (s)' })],
        width: 12,
      }),
      new GraphWidget({
        title: 'Node queue',
        left: [
          nodeQueue.metricApproximateNumberOfMessagesVisible({ period, label: 'visible' }),
          nodeQueue.metricApproximateNumberOfMessagesNotVisible({ period, label: 'in flight' }),
          nodeQueue.metricApproximateNumberOfMessagesDelayed({
            period,
            label: 'delayed (timer tick)',
          }),
        ],
        right: [nodeQueue.metricApproximateAgeOfOldestMessage({ period, label: 'oldest (s)' })],
        width: 12,
      }),
      new GraphWidget({
        title: 'Syncs by outcome',
        left: [
          search(
            `SEARCH('{${metricsNamespace},kind,outcome,service} MetricName="Syncs"', 'Sum', 60)`,
            'syncs',
          ),
        ],
        right: [
          custom('Retries', 'Sum', 'retries'),
          custom('MalformedMessages', 'Sum', 'malformed'),
          custom('NodeSyncFailures', 'Sum', 'node-sync failures'),
          custom('UnexpectedFailures', 'Sum', 'unexpected failures'),
          // By what fixes them: quota, capacity, permission and dependency need someone.
          search(
            `SEARCH('{${metricsNamespace},class,service} MetricName="RetryableFailures"', 'Sum', 60)`,
            'retried',
          ),
        ],
        width: 12,
      }),
    );
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Sync latency (ms)',
        left: [custom('SyncLatency', 'p50', 'p50'), custom('SyncLatency', 'p99', 'p99')],
        right: [custom('NodeSyncDuration', 'Maximum', 'node sync (max)')],
        width: 12,
      }),
      new GraphWidget({
        title: 'AWS calls by operation',
        left: [
          search(
            `SEARCH('{${metricsNamespace},awsService,operation,service} MetricName="AwsCalls"', 'Sum', 60)`,
            'calls',
          ),
        ],
        width: 12,
      }),
    );
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Function errors and throttles',
        left: perFunction((fn) => fn.metricErrors({ period })),
        right: perFunction((fn) => fn.metricThrottles({ period })),
        width: 8,
      }),
      new GraphWidget({
        title: 'Function duration p99 (ms)',
        left: perFunction((fn) => fn.metricDuration({ period, statistic: 'p99' })),
        width: 8,
      }),
      new GraphWidget({
        title: 'Concurrent executions',
        left: perFunction((fn) =>
          fn.metric('ConcurrentExecutions', { period, statistic: 'Maximum' }),
        ),
        width: 8,
      }),
    );
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Forwarder (from its heartbeats)',
        left: [
          custom('ForwarderHeartbeats', 'Sum', 'heartbeats'),
          custom('ForwarderSendFailures', 'Sum', 'failed sends to the queue'),
        ],
        right: [custom('ForwarderPendingKeys', 'Maximum', 'keys waiting in the forwarder')],
        width: 12,
      }),
      new GraphWidget({
        title: 'Lifecycle events (EventBridge)',
        left: [
          custom('LifecycleEventsPublished', 'Sum', 'published'),
          custom('LifecycleEventPublishFailures', 'Sum', 'rejected, queued to try again'),
          custom('LifecycleEventsDropped', 'Sum', 'dropped'),
        ],
        width: 12,
      }),
    );
  }
}
