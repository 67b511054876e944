import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Annotations, Duration } from 'aws-cdk-lib';
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
  type IWidget,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { Topic } from 'aws-cdk-lib/aws-sns';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { packageRoot } from '../functions/package/package-root';

/**
 * The functions' EMF namespace and default dimensions (functions/wiring/wiring.ts). The cluster is
 * one of them so that two controllers in one account and Region never read each other's metrics:
 * one cluster's heartbeats would keep the other's ForwarderQuiet green.
 */
export const metricsNamespace = 'ServerlessServiceController';
export const metricDimensionsFor = (clusterName: string) => ({
  service: 'controller',
  cluster: clusterName,
});

/**
 * The repository's web address from a package.json: `repository` (a URL, `github:owner/name` or
 * `owner/name`), else a GitHub `homepage`; undefined when it names neither.
 */
export function docsRepositoryUrl(manifest: {
  repository?: unknown;
  homepage?: unknown;
}): string | undefined {
  const { repository, homepage } = manifest;
  const url =
    typeof repository === 'string'
      ? repository
      : typeof repository === 'object' && repository !== null && 'url' in repository
        ? repository.url
        : undefined;
  if (typeof url === 'string') {
    const shorthand = /^(?:github:)?([\w.-]+\/[\w.-]+)$/.exec(url);
    if (shorthand) return `https://github.com/${shorthand[1]}`;
    return url
      .replace(/^git\+/, '')
      .replace(/^git@([^:]+):/, 'https://$1/')
      .replace(/^(?:git|ssh):\/\/(?:git@)?/, 'https://')
      .replace(/\.git$/, '');
  }
  if (typeof homepage === 'string' && homepage.startsWith('https://github.com/')) {
    return homepage.replace(/[#?].*$/, '').replace(/\/$/, '');
  }
  return undefined;
}

/**
 * Where a runbook section is, for the person paged: in the docs of the version installed, not a
 * path in a checkout they may not have. A URL at the release's tag (`blob/v<version>`) when
 * package.json names the repository; until it does, the package and version whose
 * docs/operations.md holds the section (every installed copy ships it), rather than a guessed URL.
 */
export function runbookReference(
  manifest: { name: string; version: string; repository?: unknown; homepage?: unknown },
  anchor: string,
): string {
  const repository = docsRepositoryUrl(manifest);
  return repository === undefined
    ? `section "${anchor}" of docs/operations.md in ${manifest.name} ${manifest.version}`
    : `${repository}/blob/v${manifest.version}/docs/operations.md#${anchor}`;
}

function installedManifest(): { name: string; version: string } {
  return JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as {
    name: string;
    version: string;
  };
}

export interface ControllerMonitoringProps {
  /** The custom metrics' `cluster` dimension; may be a token (an eks.Cluster's name). */
  readonly clusterName: string;
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

/** What the alarms and the dashboard build their metrics from: this cluster's only. */
interface MetricKit {
  readonly period: Duration;
  readonly fiveMinutes: Duration;
  readonly fns: readonly [string, IFunction][];
  readonly ownDimensions: Record<string, string>;
  readonly custom: (metricName: string, statistic: string, label?: string) => Metric;
  readonly search: (
    metricName: string,
    dimensions: readonly string[],
    label: string,
  ) => MathExpression;
  readonly total: (label: string, metric: (fn: IFunction) => IMetric) => MathExpression;
  readonly failuresOf: (failureClass: string) => Metric;
  readonly countOf: (metricName: string) => Metric;
  readonly runbook: (anchor: string) => string;
}

function metricKit(props: ControllerMonitoringProps): MetricKit {
  const fns = Object.entries(props.functions);
  const period = Duration.minutes(1);
  const fiveMinutes = Duration.minutes(5);
  const ownDimensions = metricDimensionsFor(props.clusterName);
  const manifest = installedManifest();
  const own = (metricName: string, statistic: string, extra: Record<string, string> = {}) =>
    new Metric({
      namespace: metricsNamespace,
      metricName,
      dimensionsMap: { ...ownDimensions, ...extra },
      statistic,
      period: fiveMinutes,
    });
  return {
    period,
    fiveMinutes,
    fns,
    ownDimensions,
    custom: (metricName, statistic, label) =>
      new Metric({
        namespace: metricsNamespace,
        metricName,
        dimensionsMap: ownDimensions,
        statistic,
        period,
        ...(label ? { label } : {}),
      }),
    // A search sees every cluster's metrics in the namespace unless told which; quoted, the value
    // matches whole (an unquoted `blue` would also find `blue-2`).
    search: (metricName, dimensions, label) =>
      new MathExpression({
        expression: `SEARCH('{${metricsNamespace},${[...dimensions, ...Object.keys(ownDimensions)].sort().join(',')}} MetricName="${metricName}" cluster="${props.clusterName}"', 'Sum', 60)`,
        label,
        period,
        usingMetrics: {},
      }),
    // FILL: a function that did not run in a period has no datapoint, which would blank the sum.
    total: (label, metric) =>
      new MathExpression({
        expression: fns.map((_, i) => `FILL(m${i}, 0)`).join('+'),
        usingMetrics: Object.fromEntries(fns.map(([, fn], i) => [`m${i}`, metric(fn)])),
        label,
        period,
      }),
    failuresOf: (failureClass) => own('RetryableFailures', 'Sum', { class: failureClass }),
    countOf: (metricName) => own(metricName, 'Sum'),
    runbook: (anchor) => runbookReference(manifest, anchor),
  };
}

/** How an alarm treats its threshold and its missing data. */
interface AlarmShape {
  readonly below?: boolean;
  readonly missingBreaches?: boolean;
  readonly missingSkipped?: boolean;
}

/** One dashboard and the alarms docs/operations.md explains, optionally notifying an SNS topic. */
export class ControllerMonitoring extends Construct {
  readonly dashboard: Dashboard;
  readonly alarms: Alarm[] = [];

  constructor(scope: Construct, id: string, props: ControllerMonitoringProps) {
    super(scope, id);
    const kit = metricKit(props);
    this.deliveryAlarms(kit, props);
    this.failureAlarms(kit, props);
    this.forwarderAlarms(kit);
    this.notify(kit, props);
    this.dashboard = new Dashboard(this, 'Dashboard', {
      dashboardName: props.dashboardName,
      defaultInterval: Duration.hours(3),
    });
    this.dashboard.addWidgets(
      new AlarmStatusWidget({ title: 'Alarms', alarms: this.alarms, width: 24, height: 3 }),
    );
    this.dashboard.addWidgets(...queueWidgets(kit, props));
    this.dashboard.addWidgets(...latencyWidgets(kit));
    this.dashboard.addWidgets(...functionWidgets(kit));
    this.dashboard.addWidgets(...forwarderWidgets(kit));
  }

  /** Work that does not move: the queues, and the functions themselves failing. */
  private deliveryAlarms(kit: MetricKit, props: ControllerMonitoringProps): void {
    this.alarm(
      kit,
      'DeadLetters',
      props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
        period: kit.period,
        statistic: 'Maximum',
      }),
      0,
      'A work or node message failed every delivery and is parked in the DLQ.',
    );
    this.alarm(
      kit,
      'OldestMessage',
      props.queue.metricApproximateAgeOfOldestMessage({ period: kit.period, statistic: 'Maximum' }),
      props.oldestMessageAlarmSeconds ?? 900,
      'Work has waited longer than backoff explains: syncs are stuck or throttled.',
    );
    // Node messages see no backoff: only the timer's tick is delayed, and a failed delivery comes
    // back after the visibility timeout; one older than both means node sync is not consuming.
    this.alarm(
      kit,
      'NodeBacklog',
      props.nodeQueue.metricApproximateAgeOfOldestMessage({
        period: kit.period,
        statistic: 'Maximum',
      }),
      props.nodeBacklogAlarmSeconds,
      'A node message has waited longer than the node-sync period: node changes do not reach the load balancers.',
    );
    this.alarm(
      kit,
      'FunctionErrors',
      kit.total('function errors', (fn) =>
        fn.metricErrors({ period: kit.period, statistic: 'Sum' }),
      ),
      0,
      'A controller function failed (not a sync outcome: a crash or timeout).',
    );
    this.alarm(
      kit,
      'Throttles',
      kit.total('function throttles', (fn) =>
        fn.metricThrottles({ period: kit.period, statistic: 'Sum' }),
      ),
      0,
      'Lambda throttled a controller function (account concurrency).',
    );
  }

  /** Failures that retrying alone never fixes, and syncs that keep failing. */
  private failureAlarms(kit: MetricKit, props: ControllerMonitoringProps): void {
    this.alarm(
      kit,
      'PermissionFailures',
      kit.failuresOf('permission'),
      0,
      'AWS or Kubernetes refused the controller (AccessDenied, UnauthorizedOperation, 401, 403): Services wait until the policy or RBAC is fixed.',
    );
    this.alarm(
      kit,
      'QuotaFailures',
      kit.failuresOf('quota'),
      0,
      'An AWS quota is exhausted (TooManyLoadBalancers, TooManyTargets, SecurityGroupLimitExceeded, ...): Services wait until it is raised.',
    );
    this.alarm(
      kit,
      'CapacityFailures',
      kit.failuresOf('capacity'),
      0,
      'AWS lacks capacity or free addresses in a subnet for a load balancer.',
    );
    this.alarm(
      kit,
      'DependencyFailures',
      kit.failuresOf('dependency'),
      0,
      'Something a load balancer needs has been missing for 15 minutes (a certificate, a tagged subnet, a security group).',
      3,
    );
    this.alarm(
      kit,
      'UnexpectedFailures',
      kit.countOf('UnexpectedFailures'),
      0,
      'A sync hit a bug or the state table failed.',
    );
    this.alarm(
      kit,
      'NodeSyncFailures',
      kit.countOf('NodeSyncFailures'),
      0,
      'Node sync has failed for 15 minutes: node changes do not reach the load balancers.',
      3,
    );
    this.alarm(
      kit,
      'FailingServices',
      new Metric({
        namespace: metricsNamespace,
        metricName: 'FailingServices',
        dimensionsMap: kit.ownDimensions,
        statistic: 'Maximum',
        // One value per sweep: a period as long as the sweep's always holds one.
        period: Duration.minutes(props.sweepPeriodMinutes),
      }),
      0,
      'Services whose syncs have failed for more than 15 minutes, as the last sweep counted them.',
    );
  }

  /** The in-cluster forwarder, silent or deaf. */
  private forwarderAlarms(kit: MetricKit): void {
    // The forwarder sends a heartbeat a minute; ten minutes without one (no datapoint at all is
    // the usual shape of it) means no Service or Node change reaches the functions.
    this.alarm(
      kit,
      'ForwarderQuiet',
      kit.countOf('ForwarderHeartbeats'),
      1,
      'No heartbeat from the in-cluster forwarder for 10 minutes: changes in the cluster do not reach the controller.',
      2,
      { below: true, missingBreaches: true },
    );
    // Heartbeats go on whatever the watches do, so a forwarder refused its watches (RBAC lost, a
    // 403) is not quiet, only deaf. Minimum: every heartbeat of the period reported a watch
    // failing, so an API server's brief restart does not page. Periods without a heartbeat are
    // skipped rather than counted as fine: a forwarder that lost its watches fails /healthz after
    // 4 to 8 minutes and is restarted, with gaps of up to 5 minutes (CrashLoopBackOff) between its
    // runs; its heartbeats report the watches failing from its start (never listed counts), so two
    // periods with heartbeats, all failing, page even while it crash-loops.
    this.alarm(
      kit,
      'ForwarderWatchesFailing',
      new Metric({
        namespace: metricsNamespace,
        metricName: 'ForwarderFailingWatches',
        dimensionsMap: kit.ownDimensions,
        statistic: 'Minimum',
        period: kit.fiveMinutes,
      }),
      0,
      'In two 5-minute periods with forwarder heartbeats, every heartbeat reported a failing Service or Node watch: their changes do not reach the controller.',
      2,
      { missingSkipped: true },
    );
  }

  /** Who hears of the alarms: the SNS topic, or a synth warning that nobody does. */
  private notify(kit: MetricKit, props: ControllerMonitoringProps): void {
    if (props.alarmTopicArn !== undefined) {
      const topic = Topic.fromTopicArn(this, 'AlarmTopic', props.alarmTopicArn);
      for (const created of this.alarms) {
        created.addAlarmAction(new SnsAction(topic));
        created.addOkAction(new SnsAction(topic));
      }
    } else {
      // Valid (alarm state changes can be routed by an EventBridge rule), but by default nobody
      // would hear of them: said at every synth, and acknowledged by id where that is intended.
      Annotations.of(this).addWarningV2(
        'serverless-service-controller:alarmsWithoutTopic',
        `no alarmTopicArn: the ${this.alarms.length} alarms notify nobody (they only change state in CloudWatch). Give alarmTopicArn an SNS topic, or acknowledge this warning (Annotations.of(scope).acknowledgeWarning) when alarm state changes reach you another way; see ${kit.runbook('alarms-and-who-hears-of-them')}`,
      );
    }
  }

  private alarm(
    kit: MetricKit,
    name: string,
    metric: IMetric,
    threshold: number,
    description: string,
    evaluationPeriods = 1,
    when: AlarmShape = {},
  ): Alarm {
    const created = new Alarm(this, name, {
      metric,
      threshold,
      evaluationPeriods,
      ...(when.missingSkipped ? { datapointsToAlarm: evaluationPeriods } : {}),
      comparisonOperator: when.below
        ? ComparisonOperator.LESS_THAN_THRESHOLD
        : ComparisonOperator.GREATER_THAN_THRESHOLD,
      treatMissingData: when.missingBreaches
        ? TreatMissingData.BREACHING
        : when.missingSkipped
          ? TreatMissingData.MISSING
          : TreatMissingData.NOT_BREACHING,
      alarmDescription: `${description} See ${kit.runbook(name.toLowerCase())}.`,
    });
    this.alarms.push(created);
    return created;
  }
}

/** The queues and the syncs they carry. */
function queueWidgets(kit: MetricKit, props: ControllerMonitoringProps): IWidget[] {
  const { queue, nodeQueue, deadLetterQueue } = props;
  const { period, custom, search } = kit;
  return [
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
      left: [search('Syncs', ['kind', 'outcome'], 'syncs')],
      right: [
        custom('Retries', 'Sum', 'retries'),
        custom('MalformedMessages', 'Sum', 'malformed'),
        custom('NodeSyncFailures', 'Sum', 'node-sync failures'),
        custom('UnexpectedFailures', 'Sum', 'unexpected failures'),
        // By what fixes them: quota, capacity, permission and dependency need someone.
        search('RetryableFailures', ['class'], 'retried'),
      ],
      width: 12,
    }),
  ];
}

/** How long syncs take, and the AWS calls they make. */
function latencyWidgets(kit: MetricKit): IWidget[] {
  const { custom, search } = kit;
  return [
    new GraphWidget({
      title: 'Sync latency (ms)',
      left: [custom('SyncLatency', 'p50', 'p50'), custom('SyncLatency', 'p99', 'p99')],
      right: [custom('NodeSyncDuration', 'Maximum', 'node sync (max)')],
      width: 12,
    }),
    new GraphWidget({
      title: 'AWS calls by operation',
      left: [search('AwsCalls', ['awsService', 'operation'], 'calls')],
      width: 12,
    }),
  ];
}

/** The functions as Lambda sees them. */
function functionWidgets(kit: MetricKit): IWidget[] {
  const { period } = kit;
  const perFunction = (metric: (fn: IFunction) => IMetric) => kit.fns.map(([, fn]) => metric(fn));
  return [
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
  ];
}

/** What the forwarder and the lifecycle events report. */
function forwarderWidgets(kit: MetricKit): IWidget[] {
  const { custom } = kit;
  return [
    new GraphWidget({
      title: 'Forwarder (from its heartbeats)',
      left: [
        custom('ForwarderHeartbeats', 'Sum', 'heartbeats'),
        custom('ForwarderSendFailures', 'Sum', 'failed sends to the queue'),
        custom('ForwarderWatchFailures', 'Sum', 'failed lists and watches'),
      ],
      right: [
        custom('ForwarderPendingKeys', 'Maximum', 'keys waiting in the forwarder'),
        custom('ForwarderFailingWatches', 'Maximum', 'watches failing (of 2)'),
      ],
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
  ];
}
