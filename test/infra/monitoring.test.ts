import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Annotations as CoreAnnotations, App, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { synthOnlyEksCluster } from '../support/eks-cluster';
import { ControllerStack } from '../../infra/controller-stack';
import { docsRepositoryUrl, runbookReference } from '../../infra/monitoring';
import { ServiceController } from '../../infra/service-controller';
import { settingsFromContext, stackNameFor } from '../../infra/settings';

type Json = unknown;
const env = { account: '123456789012', region: 'eu-west-1' };

function newApp() {
  return new App({
    outdir: mkdtempSync(join(tmpdir(), 'cdk-')),
    context: { 'aws:cdk:bundling-stacks': [] },
  });
}

/** The standalone app's stack for one cluster, as `cdk deploy -c clusterName=…` makes it. */
function controllerStack(app: App, clusterName: string, extra: Record<string, string> = {}) {
  const context: Record<string, string> = {
    clusterName,
    vpcId: 'vpc-0123abcd',
    nodeSecurityGroupIds: 'sg-0123456789abcdef0',
    ...extra,
  };
  return new ControllerStack(app, stackNameFor(clusterName), {
    settings: settingsFromContext((key) => context[key]),
    env,
  });
}

/**
 * A value as CloudFormation will see it once deployed: a reference to a resource is qualified by
 * its stack, since two stacks' resources are distinct however alike their logical IDs. Pseudo
 * parameters (`AWS::Region`) are the same in every stack of one account and Region.
 */
function deployed(value: Json, stackName: string): Json {
  if (Array.isArray(value)) return value.map((v) => deployed(v, stackName));
  if (typeof value !== 'object' || value === null) return value;
  const entries = Object.entries(value as Record<string, Json>);
  const [first] = entries;
  if (entries.length === 1 && first !== undefined && ['Ref', 'Fn::GetAtt'].includes(first[0])) {
    const target = JSON.stringify(first[1]);
    return target.includes('AWS::') ? target : `${stackName}!${target}`;
  }
  return Object.fromEntries(entries.map(([k, v]) => [k, deployed(v, stackName)]));
}

/** Namespace, name and dimensions (in name order): what makes two metrics the same metric. */
function metricKey(
  namespace: Json,
  name: Json,
  dimensions: readonly (readonly [Json, Json])[],
): string {
  const dims = [...dimensions]
    .map(([k, v]) => `${JSON.stringify(k)}=${JSON.stringify(v)}`)
    .sort()
    .join(',');
  return `${JSON.stringify(namespace)} ${JSON.stringify(name)} {${dims}}`;
}

interface AlarmMetric {
  Namespace?: Json;
  MetricName?: Json;
  Dimensions?: { Name: Json; Value: Json }[];
}
interface AlarmProperties extends AlarmMetric {
  AlarmDescription: string;
  Metrics?: { MetricStat?: { Metric: AlarmMetric } }[];
}

function alarmsOf(template: Template, stackName: string): AlarmProperties[] {
  return Object.values(template.findResources('AWS::CloudWatch::Alarm')).map(
    (a) =>
      deployed((a as { Properties: AlarmProperties }).Properties, stackName) as AlarmProperties,
  );
}

/** Every metric every alarm reads, a math expression's metrics included. */
function alarmMetrics(template: Template, stackName: string): string[] {
  const key = (m: AlarmMetric) =>
    metricKey(
      m.Namespace,
      m.MetricName,
      (m.Dimensions ?? []).map((d) => [d.Name, d.Value] as const),
    );
  return alarmsOf(template, stackName).flatMap((alarm) => [
    ...(alarm.MetricName === undefined ? [] : [key(alarm)]),
    ...(alarm.Metrics ?? []).flatMap((m) => (m.MetricStat ? [key(m.MetricStat.Metric)] : [])),
  ]);
}

/** Joins an Fn::Join as CloudFormation would, a reference standing for its deployed value. */
function render(value: Json, stackName: string): string {
  if (typeof value === 'string') return value;
  const join = (value as { 'Fn::Join'?: [string, Json[]] })['Fn::Join'];
  // Within a JSON string: a placeholder with nothing to escape.
  if (join === undefined) return encodeURIComponent(JSON.stringify(deployed(value, stackName)));
  return join[1].map((part) => render(part, stackName)).join(join[0]);
}

/** Every metric and search expression every dashboard widget graphs. */
function dashboardMetrics(template: Template, stackName: string): string[] {
  return Object.values(template.findResources('AWS::CloudWatch::Dashboard')).flatMap((d) => {
    const body = JSON.parse(
      render((d as { Properties: { DashboardBody: Json } }).Properties.DashboardBody, stackName),
    ) as { widgets: { properties: { metrics?: Json[][] } }[] };
    return body.widgets.flatMap((widget) =>
      (widget.properties.metrics ?? []).map((entry) => {
        const expression = (entry[0] as { expression?: string }).expression;
        if (expression !== undefined) return `expression ${expression}`;
        // [namespace, name, dimension, value, …, {options}]
        const parts = entry.filter((p) => typeof p === 'string');
        const pairs: [Json, Json][] = [];
        for (let i = 2; i < parts.length; i += 2) pairs.push([parts[i], parts[i + 1]]);
        return metricKey(parts[0], parts[1], pairs);
      }),
    );
  });
}

function sharedMetrics(a: readonly string[], b: readonly string[]): string[] {
  const other = new Set(b);
  return [...new Set(a)].filter((key) => other.has(key));
}

describe('two clusters in one account and Region', { timeout: 120_000 }, () => {
  it('two standalone stacks: their alarms and dashboards share no metric', () => {
    const app = newApp();
    const blue = controllerStack(app, 'blue');
    const green = controllerStack(app, 'green');
    const [b, g] = [blue, green].map((s) => ({ name: s.stackName, t: Template.fromStack(s) }));
    const alarms = [b, g].map((s) => alarmMetrics(s!.t, s!.name));
    const graphs = [b, g].map((s) => dashboardMetrics(s!.t, s!.name));
    // What is compared: every alarm (13 or more) and graph, our own metrics among them.
    for (const list of [...alarms, ...graphs]) {
      expect(
        list.filter((k) => k.startsWith('"ServerlessServiceController"')).length,
      ).toBeGreaterThan(5);
    }
    expect(graphs[0]!.some((k) => k.startsWith('expression SEARCH('))).toBe(true);
    expect(sharedMetrics(alarms[0]!, alarms[1]!)).toEqual([]);
    expect(sharedMetrics(graphs[0]!, graphs[1]!)).toEqual([]);
    // Nor one stack's alarm on the other's graph.
    expect(sharedMetrics(alarms[0]!, graphs[1]!)).toEqual([]);
    // Our own metrics are told apart by the cluster, searches included.
    for (const key of alarms[0]!.filter((k) => k.startsWith('"ServerlessServiceController"'))) {
      expect(key).toContain('"cluster"="blue"');
    }
    for (const key of graphs[1]!.filter((k) => k.startsWith('expression SEARCH('))) {
      expect(key).toContain('cluster="green"');
    }
  });

  it('two constructs in one stack, one on an eks.Cluster (a name known at deploy): no metric shared', () => {
    const app = newApp();
    const stack = new Stack(app, 'Platform', { env });
    const cluster = synthOnlyEksCluster(stack);
    const first = new ServiceController(stack, 'Lb', { cluster });
    const second = new ServiceController(stack, 'Other', {
      clusterName: 'other',
      vpcId: 'vpc-0123abcd',
      nodeSecurityGroupIds: ['sg-0123456789abcdef0'],
    });
    const template = Template.fromStack(stack);
    const ofConstruct = (controller: ServiceController) => {
      const prefix = controller.node.id;
      const alarms = Object.entries(template.findResources('AWS::CloudWatch::Alarm'))
        .filter(([id]) => id.startsWith(`${prefix}Monitoring`))
        .map(([, a]) => a);
      const dashboards = Object.entries(template.findResources('AWS::CloudWatch::Dashboard'))
        .filter(([id]) => id.startsWith(`${prefix}Monitoring`))
        .map(([, d]) => d);
      const own = Template.fromJSON({
        Resources: Object.fromEntries([...alarms, ...dashboards].map((r, i) => [`R${i}`, r])),
      });
      return { alarms: alarmMetrics(own, 'Platform'), graphs: dashboardMetrics(own, 'Platform') };
    };
    const a = ofConstruct(first);
    const b = ofConstruct(second);
    expect(a.alarms.length).toBeGreaterThanOrEqual(13);
    expect(sharedMetrics(a.alarms, b.alarms)).toEqual([]);
    expect(sharedMetrics(a.graphs, b.graphs)).toEqual([]);
    // The eks.Cluster's name is a reference, resolved at deploy, in the alarms' dimensions too.
    const clusterRef = Object.keys(template.findResources('Custom::AWSCDK-EKS-Cluster'))[0]!;
    const own = a.alarms.filter((k) => k.startsWith('"ServerlessServiceController"'));
    expect(own.length).toBeGreaterThan(5);
    for (const key of own) {
      expect(key).toContain(
        `"cluster"=${JSON.stringify(`Platform!${JSON.stringify(clusterRef)}`)}`,
      );
    }
  });
});

describe('alarms that notify nobody', () => {
  const warningsOf = (stack: Stack) =>
    Annotations.fromStack(stack).findWarning('*', Match.stringLikeRegexp('alarmTopicArn'));

  it('without alarmTopicArn: a synth warning says the alarms notify nobody', () => {
    const stack = controllerStack(newApp(), 'blue');
    const found = warningsOf(stack);
    expect(found).toHaveLength(1);
    expect(JSON.stringify(found[0]?.entry.data)).toMatch(/notify nobody/);
    expect(JSON.stringify(found[0]?.entry.data)).toContain(
      'serverless-service-controller:alarmsWithoutTopic',
    );
  });

  it('with alarmTopicArn, or the warning acknowledged, says nothing', () => {
    const withTopic = controllerStack(newApp(), 'blue', {
      alarmTopicArn: 'arn:aws:sns:eu-west-1:123456789012:oncall',
    });
    expect(warningsOf(withTopic)).toEqual([]);
    const acknowledged = controllerStack(newApp(), 'blue');
    CoreAnnotations.of(acknowledged).acknowledgeWarning(
      'serverless-service-controller:alarmsWithoutTopic',
      'alarm state changes go to EventBridge',
    );
    expect(warningsOf(acknowledged)).toEqual([]);
  });
});

describe('the forwarder’s watches', () => {
  it('alarm when every heartbeat of two periods with heartbeats reported a failing watch, on the cluster’s metric', () => {
    const stack = controllerStack(newApp(), 'blue');
    const alarm = alarmsOf(Template.fromStack(stack), stack.stackName).find(
      (a) => a.MetricName === 'ForwarderFailingWatches',
    );
    expect(alarm).toMatchObject({
      Namespace: 'ServerlessServiceController',
      // Minimum: every heartbeat in the period reported a failing watch, not a brief blip.
      Statistic: 'Minimum',
      Period: 300,
      EvaluationPeriods: 2,
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
      // Periods without heartbeats (a crash-looping pod's backoff) are skipped, not counted as
      // fine: two periods with heartbeats, all failing, page.
      TreatMissingData: 'missing',
      DatapointsToAlarm: 2,
    });
    expect(alarm?.Dimensions).toEqual(
      expect.arrayContaining([
        { Name: 'service', Value: 'controller' },
        { Name: 'cluster', Value: 'blue' },
      ]),
    );
    expect(alarm?.AlarmDescription).toMatch(/forwarderwatchesfailing/);
  });
});

describe('alarm descriptions', () => {
  const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as {
    name: string;
    version: string;
    repository?: unknown;
    homepage?: unknown;
  };

  it('name the runbook section of the installed version, which exists', () => {
    const stack = controllerStack(newApp(), 'blue');
    const alarms = alarmsOf(Template.fromStack(stack), stack.stackName);
    expect(alarms.length).toBeGreaterThanOrEqual(14);
    const runbook = readFileSync('docs/operations.md', 'utf8');
    for (const alarm of alarms) {
      const anchor = /See (.*)\.$/.exec(alarm.AlarmDescription)?.[1];
      const section =
        anchor === undefined ? undefined : /#([a-z]+)$|section "([a-z]+)"/.exec(anchor);
      const name = section?.[1] ?? section?.[2] ?? '';
      expect(alarm.AlarmDescription).toContain(runbookReference(manifest, name));
      expect(runbook).toContain(`\n## ${name}\n`);
      // The version whose docs hold the section, not a path in a checkout.
      expect(alarm.AlarmDescription).toContain(manifest.version);
    }
  });

  it('take the repository from package.json when it names one', () => {
    expect(docsRepositoryUrl({})).toBeUndefined();
    expect(docsRepositoryUrl({ repository: 'github:acme/ssc' })).toBe(
      'https://github.com/acme/ssc',
    );
    expect(docsRepositoryUrl({ repository: 'acme/ssc' })).toBe('https://github.com/acme/ssc');
    expect(
      docsRepositoryUrl({
        repository: { type: 'git', url: 'git+https://github.com/acme/ssc.git' },
      }),
    ).toBe('https://github.com/acme/ssc');
    expect(docsRepositoryUrl({ repository: { url: 'git@github.com:acme/ssc.git' } })).toBe(
      'https://github.com/acme/ssc',
    );
    expect(docsRepositoryUrl({ homepage: 'https://github.com/acme/ssc#readme' })).toBe(
      'https://github.com/acme/ssc',
    );
    // A homepage that is not the repository says nothing about where the docs are.
    expect(docsRepositoryUrl({ homepage: 'https://example.com/ssc' })).toBeUndefined();
    expect(
      runbookReference({ name: 'ssc', version: '1.2.3', repository: 'acme/ssc' }, 'deadletters'),
    ).toBe('https://github.com/acme/ssc/blob/v1.2.3/docs/operations.md#deadletters');
    expect(runbookReference({ name: 'ssc', version: '1.2.3' }, 'deadletters')).toBe(
      'section "deadletters" of docs/operations.md in ssc 1.2.3',
    );
  });
});
