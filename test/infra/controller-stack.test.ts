import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAllYaml } from '@kubernetes/client-node';
import { App, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import { describe, expect, it, vi } from 'vitest';
import { createApp } from '../../infra/app';
import { configureKustomization } from '../../scripts/configure-k8s';
import {
  controllerGroup,
  forwarderNamespace,
  forwarderServiceAccount,
} from '../../infra/controller-stack';
import { settingsFromContext, stackNameFor } from '../../infra/settings';
import { settingNames } from '../../infra/settings-schema';
import { flushMetrics, powertoolsMetrics } from '../../functions/wiring/wiring';
import { sampleForwarderConfig } from '../support/forwarder-config';

const base = {
  clusterName: 'demo',
  vpcId: 'vpc-0123abcd',
  nodeSecurityGroupIds: 'sg-0123456789abcdef0,sg-0fedcba9876543210',
};

/** Synthesises the real app; function bundling is skipped except where a test needs it. */
function synth(context: Record<string, unknown> = {}, bundle = false) {
  const app = new App({
    outdir: mkdtempSync(join(tmpdir(), 'cdk-')),
    context: { ...base, ...context, ...(bundle ? {} : { 'aws:cdk:bundling-stacks': [] }) },
  });
  const { stack } = createApp(app);
  return { app, stack, template: Template.fromStack(stack) };
}

type Statement = {
  Action: string | string[];
  Resource: unknown;
  Condition?: Record<string, Record<string, unknown>>;
};
function statementsOf(template: Template, roleLogicalIdPrefix: string): Statement[] {
  const policies = template.findResources('AWS::IAM::Policy');
  return Object.values(policies)
    .filter((p) =>
      JSON.stringify((p as { Properties: { Roles: unknown } }).Properties.Roles).includes(
        roleLogicalIdPrefix,
      ),
    )
    .flatMap(
      (p) =>
        (p as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties
          .PolicyDocument.Statement,
    );
}
const actionsOf = (s: Statement) => (Array.isArray(s.Action) ? s.Action : [s.Action]);

describe('CDK app (infra/)', () => {
  it('synthesises offline with local esbuild bundling and cdk-nag AWS Solutions checks, with no unacknowledged finding', () => {
    const { app } = synth({}, true);
    // synth() throws ValidationFailed when cdk-nag reports an unacknowledged finding.
    const assembly = app.synth();
    const report = JSON.parse(
      readFileSync(join(assembly.directory, 'validation-report.json'), 'utf8'),
    ) as { pluginReports: { conclusion: string }[] };
    expect(report.pluginReports.filter((r) => r.conclusion !== 'success')).toEqual([]);
    expect(new AwsSolutionsChecks().validateScope(app).violations).toEqual([]);

    // The bundles carry the AWS SDK we test with (nothing is left to the runtime's copy), keep
    // names for readable traces and ship no source map (infra/lambda-bundling.ts).
    const bundles = readdirSync(assembly.directory)
      .filter((name) => name.startsWith('asset.'))
      .map((name) => join(assembly.directory, name))
      .filter((dir) => readdirSync(dir).includes('index.mjs'));
    expect(bundles.length).toBeGreaterThanOrEqual(3);
    for (const dir of bundles) {
      expect(readdirSync(dir).filter((name) => name.endsWith('.map'))).toEqual([]);
      // Our build replaced CDK's single file (afterBundling hook): the handler and its chunks.
      expect(readdirSync(join(dir, 'chunks')).length).toBeGreaterThan(0);
      const code = readFileSync(join(dir, 'index.mjs'), 'utf8');
      const imported = [
        ...code.matchAll(
          /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*)["'](@aws-sdk\/[^"']+)["']/g,
        ),
      ].map((m) => m[1]);
      // Only the optional SigV4a signers are named (one try-require, one error message): no call of
      // ours signs with SigV4a, so neither is needed.
      const optional = ['@aws-sdk/signature-v4-crt', '@aws-sdk/signature-v4a'];
      expect(imported.filter((name) => !optional.includes(name ?? ''))).toEqual([]);
      expect(code).toContain('"DynamoDBClient"');
      expect(code).toContain('"createRuntime"');
    }
    // Each function is bundled twice (CDK's esbuild step, then ours): slow on a loaded machine.
  }, 240_000);

  it('synthesises for a concrete account and Region too, as cdk deploy does', () => {
    const app = new App({
      outdir: mkdtempSync(join(tmpdir(), 'cdk-')),
      context: { ...base, 'aws:cdk:bundling-stacks': [] },
    });
    createApp(app, { account: '123456789012', region: 'eu-west-1' });
    expect(() => app.synth()).not.toThrow();
    // The first synthesis in a worker loads all of aws-cdk-lib: slow on a busy machine.
  }, 240_000);

  it('fails synth on a wildcard nobody acknowledged, so the checks are really on', () => {
    const app = new App({
      outdir: mkdtempSync(join(tmpdir(), 'cdk-')),
      context: { ...base, 'aws:cdk:bundling-stacks': [] },
    });
    const { stack } = createApp(app);
    const role = new Role(stack, 'Careless', {
      assumedBy: new ServicePrincipal('lambda.amazonaws.com'),
    });
    role.addToPrincipalPolicy(new PolicyStatement({ actions: ['s3:GetObject'], resources: ['*'] }));
    expect(() => app.synth()).toThrow(/Careless[\s\S]*AwsSolutions-IAM5\[Resource::\*\]/);
  });

  it('acknowledges findings one by one, each with a specific reason', () => {
    const { stack } = synth();
    const acknowledged = stack.node
      .findAll()
      .flatMap((c) => c.node.metadata)
      .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((m) => Object.entries(m.data as Record<string, string>))
      .filter(([id]) => id.includes('AwsSolutions'));
    expect(acknowledged.length).toBeGreaterThan(0);
    for (const [id, reason] of acknowledged) {
      expect(id).toMatch(/AwsSolutions-IAM5\[Resource::/);
      expect(reason.length).toBeGreaterThan(60);
    }
    expect(new Set(acknowledged.map(([, reason]) => reason)).size).toBe(acknowledged.length);
  });

  it('runs service-sync, node-sync and sweep on ARM64 with the current Node runtime and log retention', () => {
    const { template } = synth();
    const functions = template.findResources('AWS::Lambda::Function');
    expect(Object.keys(functions)).toHaveLength(3);
    for (const fn of Object.values(functions) as { Properties: Record<string, unknown> }[]) {
      expect(fn.Properties.Runtime).toBe('nodejs24.x');
      expect(fn.Properties.Architectures).toEqual(['arm64']);
      expect(JSON.stringify(fn.Properties.Environment)).toContain('CONTROLLER_CONFIG');
    }
    template.allResourcesProperties('AWS::Logs::LogGroup', { RetentionInDays: 30 });
  });

  it('feeds service-sync from the work queue with partial batch responses and a concurrency cap', () => {
    const { template } = synth({ elbv2CallsPerSecond: '40' });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BatchSize: 10,
      ScalingConfig: { MaximumConcurrency: 10 },
    });
  });

  it('gives the work queue an encrypted DLQ with a redrive policy and a visibility timeout six times the sync timeout', () => {
    const { template } = synth();
    const queues = template.findResources('AWS::SQS::Queue');
    expect(Object.keys(queues)).toHaveLength(3);
    // Fair queues are a standard-queue feature; a FIFO queue would serialise each namespace's work.
    for (const queue of Object.values(queues) as { Properties: { FifoQueue?: boolean } }[]) {
      expect(queue.Properties.FifoQueue).toBeUndefined();
    }
    template.hasResourceProperties('AWS::SQS::Queue', {
      VisibilityTimeout: 360,
      SqsManagedSseEnabled: true,
      RedrivePolicy: { deadLetterTargetArn: Match.anyValue(), maxReceiveCount: 10 },
    });
    // service-sync, and node-sync, which runs host updates of small fan-outs itself.
    const sync = template.findResources('AWS::Lambda::Function', {
      Properties: { Timeout: 60 },
    });
    expect(
      Object.keys(sync)
        .map((id) => id.replace(/[0-9A-F]{8}$/, ''))
        .sort(),
    ).toEqual(['NodeSync', 'ServiceSync']);
    template.resourceCountIs('AWS::SQS::QueuePolicy', 3);
  });

  it('lets the functions park messages that are not theirs on the DLQ, and tells them where it is', () => {
    const { template } = synth();
    const dlq = Object.entries(template.findResources('AWS::SQS::Queue')).find(
      ([, q]) =>
        (q as { Properties: Record<string, unknown> }).Properties.RedrivePolicy === undefined,
    )?.[0];
    const sends = statementsOf(template, 'FunctionsRole').filter((s) =>
      actionsOf(s).includes('sqs:SendMessage'),
    );
    expect(sends.map((s) => JSON.stringify(s.Resource))).toContainEqual(
      JSON.stringify({ 'Fn::GetAtt': [dlq, 'Arn'] }),
    );
    const fn = Object.values(template.findResources('AWS::Lambda::Function'))[0];
    expect(JSON.stringify(fn)).toMatch(
      new RegExp(`deadLetterQueueUrl.{0,40}\\{\\\\?"Ref\\\\?":\\\\?"${dlq}`),
    );
  });

  it('keeps state in an on-demand, encrypted table with point-in-time recovery and the StateStore key', () => {
    const { template } = synth();
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      SSESpecification: { SSEEnabled: true },
    });
    template.hasResource('AWS::DynamoDB::Table', { DeletionPolicy: 'Retain' });
  });

  it('protects the state table from deletion, and the README says how to lift it before deleting', () => {
    const { template } = synth();
    template.hasResourceProperties('AWS::DynamoDB::Table', { DeletionProtectionEnabled: true });
    const readme = readFileSync('README.md', 'utf8');
    const uninstall = readme.slice(
      readme.indexOf('### Uninstall'),
      readme.indexOf('## Documentation'),
    );
    const lift = uninstall.indexOf('--no-deletion-protection-enabled');
    expect(lift).toBeGreaterThan(-1);
    expect(uninstall.indexOf('aws dynamodb delete-table')).toBeGreaterThan(lift);
  });

  it('reserves a little concurrency for node-sync and sweep, none for service-sync (its event source caps it)', () => {
    const { template } = synth();
    const reserved = Object.fromEntries(
      Object.entries(template.findResources('AWS::Lambda::Function')).map(([id, fn]) => [
        id.replace(/[0-9A-F]{8}$/, ''),
        (fn as { Properties: { ReservedConcurrentExecutions?: number } }).Properties
          .ReservedConcurrentExecutions,
      ]),
    );
    expect(reserved).toEqual({ ServiceSync: undefined, NodeSync: 3, Sweep: 2 });
  });

  it('schedules node sync every minute and the sweep at its period', () => {
    const { template } = synth({ sweepPeriodSeconds: '900' });
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 minute)',
    });
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(15 minutes)',
    });
  });

  it('maps the functions role to the controller group and gives the forwarder a Pod Identity that may only send', () => {
    const { template } = synth();
    template.hasResourceProperties('AWS::EKS::AccessEntry', {
      ClusterName: 'demo',
      KubernetesGroups: [controllerGroup],
      PrincipalArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^FunctionsRole'), 'Arn'] },
    });
    template.hasResourceProperties('AWS::EKS::PodIdentityAssociation', {
      ClusterName: 'demo',
      Namespace: forwarderNamespace,
      ServiceAccount: forwarderServiceAccount,
    });
    template.hasResourceProperties('AWS::IAM::Role', {
      AssumeRolePolicyDocument: {
        Statement: [
          Match.objectLike({
            Action: ['sts:AssumeRole', 'sts:TagSession'],
            Principal: { Service: 'pods.eks.amazonaws.com' },
          }),
        ],
      },
    });
    const forwarder = statementsOf(template, 'ForwarderRole');
    expect(forwarder.map((s) => s.Action)).toEqual(['sqs:SendMessage']);
    expect(JSON.stringify(forwarder[0]?.Resource)).toContain('WorkQueue');
  });

  describe('the node queue (node changes and node-sync ticks, apart from Service work)', () => {
    type Resource = { Properties: Record<string, unknown> };
    const logicalId = (template: Template, type: string, prefix: string) => {
      const ids = Object.keys(template.findResources(type)).filter((id) => id.startsWith(prefix));
      expect(ids, `${type} ${prefix}`).toHaveLength(1);
      return ids[0] as string;
    };
    const resource = (template: Template, type: string, prefix: string) =>
      template.findResources(type)[logicalId(template, type, prefix)] as Resource;

    it('is an encrypted standard queue, TLS only, redriven to the work queue’s DLQ after as many receives, visible again after six node-sync timeouts', () => {
      const { template } = synth();
      const work = resource(template, 'AWS::SQS::Queue', 'WorkQueue').Properties;
      const node = resource(template, 'AWS::SQS::Queue', 'NodeQueue').Properties;
      const dlq = logicalId(template, 'AWS::SQS::Queue', 'DeadLetterQueue');
      expect(node.FifoQueue).toBeUndefined();
      expect(node.SqsManagedSseEnabled).toBe(true);
      expect(node.RedrivePolicy).toEqual({
        deadLetterTargetArn: { 'Fn::GetAtt': [dlq, 'Arn'] },
        maxReceiveCount: (work.RedrivePolicy as { maxReceiveCount: number }).maxReceiveCount,
      });
      expect(node.MessageRetentionPeriod).toBe(work.MessageRetentionPeriod);
      const nodeSync = resource(template, 'AWS::Lambda::Function', 'NodeSync').Properties;
      expect(node.VisibilityTimeout).toBe((nodeSync.Timeout as number) * 6);
      const nodeQueue = logicalId(template, 'AWS::SQS::Queue', 'NodeQueue');
      template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [{ Ref: nodeQueue }],
        PolicyDocument: {
          Statement: [
            Match.objectLike({
              Effect: 'Deny',
              Condition: { Bool: { 'aws:SecureTransport': 'false' } },
            }),
          ],
        },
      });
    });

    it('feeds node-sync with batches of 10, no batching window, partial batch responses and the minimum concurrency, and keeps its schedule', () => {
      const { template } = synth();
      const nodeSync = logicalId(template, 'AWS::Lambda::Function', 'NodeSync');
      const nodeQueue = logicalId(template, 'AWS::SQS::Queue', 'NodeQueue');
      const mappings = Object.values(template.findResources('AWS::Lambda::EventSourceMapping'))
        .map((m) => (m as Resource).Properties)
        .filter((m) => JSON.stringify(m.FunctionName) === JSON.stringify({ Ref: nodeSync }));
      expect(mappings).toEqual([
        {
          FunctionName: { Ref: nodeSync },
          EventSourceArn: { 'Fn::GetAtt': [nodeQueue, 'Arn'] },
          BatchSize: 10,
          FunctionResponseTypes: ['ReportBatchItemFailures'],
          ScalingConfig: { MaximumConcurrency: 2 },
        },
      ]);
      // Lambda throttles batches beyond reserved concurrency: room for the mapping and the tick.
      const reserved = resource(template, 'AWS::Lambda::Function', 'NodeSync').Properties
        .ReservedConcurrentExecutions as number;
      expect(reserved).toBeGreaterThanOrEqual(3);
      template.hasResourceProperties('AWS::Events::Rule', {
        ScheduleExpression: 'rate(1 minute)',
        Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [nodeSync, 'Arn'] } })],
      });
      // The functions share one role, so node-sync's host updates have service-sync's ELBv2
      // rights, and one configuration, so the same ELBv2 endpoint.
      const roles = new Set(
        Object.values(template.findResources('AWS::Lambda::Function')).map((f) =>
          JSON.stringify((f as Resource).Properties.Role),
        ),
      );
      expect(roles.size).toBe(1);
      const register = statementsOf(template, 'FunctionsRole').filter((s) =>
        actionsOf(s).includes('elasticloadbalancing:RegisterTargets'),
      );
      expect(register.flatMap(actionsOf)).toContain('elasticloadbalancing:DeregisterTargets');
      // Its mapping may receive and delete on the node queue.
      const consume = statementsOf(template, 'FunctionsRole').filter((s) =>
        actionsOf(s).includes('sqs:ReceiveMessage'),
      );
      expect(consume.map((s) => JSON.stringify(s.Resource)).join()).toContain(nodeQueue);
    });

    it('names the node queue in every function’s CONTROLLER_CONFIG, in the forwarder’s configuration and in an output; the functions may send to it', () => {
      const { template } = synth();
      const nodeQueue = logicalId(template, 'AWS::SQS::Queue', 'NodeQueue');
      const workQueue = logicalId(template, 'AWS::SQS::Queue', 'WorkQueue');
      const refTo = (id: string) => `"nodeQueueUrl\\":\\"",{"Ref":"${id}"}`;
      for (const fn of Object.values(template.findResources('AWS::Lambda::Function'))) {
        const variables = JSON.stringify(
          ((fn as Resource).Properties.Environment as { Variables: unknown }).Variables,
        );
        expect(variables).toContain(refTo(nodeQueue));
      }
      const outputs = template.findOutputs('*') as Record<string, { Value: unknown }>;
      expect(outputs.NodeQueueUrl?.Value).toEqual({ Ref: nodeQueue });
      const forwarderConfig = JSON.stringify(outputs.ForwarderConfig?.Value);
      expect(forwarderConfig).toContain(refTo(nodeQueue));
      expect(forwarderConfig).toContain(`{"Ref":"${workQueue}"}`);
      const sends = statementsOf(template, 'FunctionsRole').filter((s) =>
        actionsOf(s).includes('sqs:SendMessage'),
      );
      expect(sends.map((s) => JSON.stringify(s.Resource))).toContainEqual(
        JSON.stringify({ 'Fn::GetAtt': [nodeQueue, 'Arn'] }),
      );
    });

    it('lets the forwarder send to the work and node queues and nothing else, with a role or a policy to attach', () => {
      const secret = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:kubeconfig-AbCdEf';
      const queues = (template: Template) => [
        { 'Fn::GetAtt': [logicalId(template, 'AWS::SQS::Queue', 'WorkQueue'), 'Arn'] },
        { 'Fn::GetAtt': [logicalId(template, 'AWS::SQS::Queue', 'NodeQueue'), 'Arn'] },
      ];
      const withRole = synth().template;
      expect(statementsOf(withRole, 'ForwarderRole')).toEqual([
        { Effect: 'Allow', Action: 'sqs:SendMessage', Resource: queues(withRole) },
      ]);
      const withPolicy = synth({ kubernetesSecretArn: secret }).template;
      const policy = resource(withPolicy, 'AWS::IAM::ManagedPolicy', 'ForwarderSendPolicy');
      expect((policy.Properties.PolicyDocument as { Statement: unknown[] }).Statement).toEqual([
        { Effect: 'Allow', Action: 'sqs:SendMessage', Resource: queues(withPolicy) },
      ]);
    });

    it('alarms when node messages wait longer than node sync explains, and graphs the node queue', () => {
      const { template } = synth({ nodeSyncPeriodSeconds: '600' });
      const nodeQueue = logicalId(template, 'AWS::SQS::Queue', 'NodeQueue');
      const alarm = resource(template, 'AWS::CloudWatch::Alarm', 'MonitoringNodeBacklog');
      expect(alarm.Properties).toMatchObject({
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateAgeOfOldestMessage',
        Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [nodeQueue, 'QueueName'] } }],
        // The timer's tick is delayed by the period (600 s), longer than the visibility timeout.
        Threshold: 660,
      });
      expect(String(alarm.Properties.AlarmDescription)).toContain(
        'section "nodebacklog" of docs/operations.md',
      );
      // With a short period, one failed delivery's visibility timeout (360 s) is what to outwait.
      const short = synth({ nodeSyncPeriodSeconds: '60' }).template;
      expect(
        resource(short, 'AWS::CloudWatch::Alarm', 'MonitoringNodeBacklog').Properties.Threshold,
      ).toBe(420);
      const body = JSON.stringify(template.findResources('AWS::CloudWatch::Dashboard'));
      expect(body).toContain('Node queue');
      expect(body).toContain(nodeQueue);
    });
  });

  // That the ClusterRole grants every Kubernetes call the functions make is exercised against the
  // fake API server enforcing it: test/integration/kube-adapters.test.ts ("under the project's
  // ClusterRole") and the runtime end-to-end tests, which run as the functions' identity.

  it('the manifests match the stack: group, namespace, ServiceAccount, and the narrow ClusterRole', () => {
    const docs = loadAllYaml(readFileSync('infra/k8s/controller-rbac.yaml', 'utf8')) as {
      kind: string;
      rules?: { resources: string[]; verbs: string[] }[];
      subjects?: { kind: string; name: string }[];
    }[];
    const role = docs.find((d) => d.kind === 'ClusterRole');
    // list services and get namespaces serve the tenant policy (maxLoadBalancerServices, selectors);
    // list endpointslices, the pod targets of nlb-target-type ip (watching them is the forwarder's).
    expect(role?.rules?.map((r) => [r.resources, r.verbs])).toEqual([
      [['services'], ['get', 'list', 'patch']],
      [['services/status'], ['patch']],
      [['nodes'], ['list']],
      [['events'], ['create', 'get', 'patch']],
      [['namespaces'], ['get']],
      [['endpointslices'], ['list']],
    ]);
    const binding = docs.find((d) => d.kind === 'ClusterRoleBinding');
    expect(binding?.subjects).toEqual([
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: controllerGroup },
    ]);
    const kustomization = readFileSync('infra/k8s/kustomization.yaml', 'utf8');
    expect(kustomization).toContain(`namespace: ${forwarderNamespace}`);
    expect(kustomization).toContain('- controller-rbac.yaml');
    expect(readFileSync('infra/k8s/serviceaccount.yaml', 'utf8')).toContain(
      `name: ${forwarderServiceAccount}`,
    );
  });

  it('has one dashboard and alarms on DLQ, errors, throttles and oldest message age, notifying a given topic', () => {
    const topic = 'arn:aws:sns:us-east-1:123456789012:oncall';
    const { template } = synth({ alarmTopicArn: topic });
    template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')) as {
      Properties: { AlarmActions: unknown[]; AlarmDescription: string };
    }[];
    expect(alarms.length).toBeGreaterThanOrEqual(4);
    const text = JSON.stringify(alarms);
    for (const metric of ['ApproximateNumberOfMessagesVisible', 'ApproximateAgeOfOldestMessage']) {
      expect(text).toContain(metric);
    }
    expect(text).toContain('Errors');
    expect(text).toContain('Throttles');
    for (const alarm of alarms) expect(alarm.Properties.AlarmActions).toEqual([topic]);
    // Every alarm points at its section of the runbook, and the section exists.
    const runbook = readFileSync('docs/operations.md', 'utf8');
    for (const alarm of alarms) {
      const anchor = /section "([a-z]+)" of docs\/operations\.md/.exec(
        alarm.Properties.AlarmDescription,
      )?.[1];
      expect(runbook).toContain(`## ${anchor ?? '(no anchor)'}`);
    }
    // Errors and throttles of functions that did not run in a period count as zero, not as missing.
    expect(text).toContain('FILL(m0, 0)+FILL(m1, 0)+FILL(m2, 0)');
    const body = JSON.stringify(
      Object.values(template.findResources('AWS::CloudWatch::Dashboard'))[0],
    );
    // Each graph's metric as CloudWatch reads it: namespace then name (in the dashboard's JSON).
    const metricRef = (namespace: string, name: string) => `\\"${namespace}\\",\\"${name}\\"`;
    for (const name of [
      'SyncLatency',
      'Retries',
      'NodeSyncDuration',
      'MalformedMessages',
      'NodeSyncFailures',
      'UnexpectedFailures',
      'LifecycleEventsPublished',
      'LifecycleEventPublishFailures',
      'LifecycleEventsDropped',
      'ForwarderHeartbeats',
      'ForwarderSendFailures',
      'ForwarderPendingKeys',
      'ForwarderWatchFailures',
      'ForwarderFailingWatches',
    ]) {
      expect(body, name).toContain(metricRef('ServerlessServiceController', name));
    }
    for (const name of ['Syncs', 'AwsCalls', 'RetryableFailures']) {
      expect(body, name).toContain(`MetricName=\\\\\\"${name}\\\\\\"`);
    }
    for (const name of ['Errors', 'Throttles', 'Duration', 'ConcurrentExecutions']) {
      expect(body, name).toContain(metricRef('AWS/Lambda', name));
    }
    for (const name of [
      'ApproximateNumberOfMessagesVisible',
      'ApproximateNumberOfMessagesNotVisible',
      'ApproximateAgeOfOldestMessage',
    ]) {
      expect(body, name).toContain(metricRef('AWS/SQS', name));
    }
  });

  it('may create ELB’s service-linked role (a fresh account’s first NLB), for that service only', () => {
    const { template } = synth();
    const iam = statementsOf(template, 'FunctionsRole').filter((s) =>
      actionsOf(s).some((a) => a.startsWith('iam:')),
    );
    expect(iam.flatMap(actionsOf)).toEqual(['iam:CreateServiceLinkedRole']);
    expect(iam[0]?.Condition).toEqual({
      StringEquals: { 'iam:AWSServiceName': 'elasticloadbalancing.amazonaws.com' },
    });
    expect(JSON.stringify(iam[0]?.Resource)).toContain(
      ':role/aws-service-role/elasticloadbalancing.amazonaws.com/AWSServiceRoleForElasticLoadBalancing',
    );
  });

  it('alarms on failures someone must fix, each on a metric the functions emit with exactly its dimensions', () => {
    const { template } = synth();
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')).map(
      (a) =>
        (
          a as {
            Properties: {
              MetricName?: string;
              Namespace?: string;
              Dimensions?: { Name: string; Value: string }[];
              EvaluationPeriods: number;
            };
          }
        ).Properties,
    );
    const ours = alarms.filter((a) => a.Namespace === 'ServerlessServiceController');
    expect(
      ours
        .map(
          (a) =>
            `${a.MetricName}${JSON.stringify(a.Dimensions?.find((d) => d.Name === 'class')?.Value ?? '')}`,
        )
        .sort(),
    ).toEqual([
      'FailingServices""',
      'ForwarderFailingWatches""',
      'ForwarderHeartbeats""',
      'NodeSyncFailures""',
      'RetryableFailures"capacity"',
      'RetryableFailures"dependency"',
      'RetryableFailures"permission"',
      'RetryableFailures"quota"',
      'UnexpectedFailures""',
    ]);
    // The functions count each metric with those dimension keys (read from their source; which
    // failure counts what is proved in test/integration/failure-classes.test.ts and churn.test.ts).
    const source = readdirSync('functions/runtime')
      .map((f) => readFileSync(`functions/runtime/${f}`, 'utf8'))
      .join('\n');
    for (const alarm of ours) {
      // Every one carries service and cluster (Powertools' default dimensions).
      expect(alarm.Dimensions, alarm.MetricName).toEqual(
        expect.arrayContaining([
          { Name: 'service', Value: 'controller' },
          { Name: 'cluster', Value: base.clusterName },
        ]),
      );
      const keys = (alarm.Dimensions ?? [])
        .map((d) => d.Name)
        .filter((n) => n !== 'service' && n !== 'cluster');
      const call = new RegExp(
        `count\\('${alarm.MetricName}'${keys.length > 0 ? `, 1, \\{ ${keys.join(': [^,}]+, ')}:` : '(\\)|, [\\w.]+\\))'}`,
      );
      expect(source, `${alarm.MetricName} ${keys.join()}`).toMatch(call);
    }
    // What the functions print for each (Powertools EMF through the runtime's own metrics port).
    const printed: string[] = [];
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      printed.push(String(chunk));
      return true;
    });
    try {
      for (const alarm of ours) {
        printed.length = 0;
        const extra = Object.fromEntries(
          (alarm.Dimensions ?? [])
            .filter((d) => d.Name !== 'service' && d.Name !== 'cluster')
            .map((d) => [d.Name, d.Value]),
        );
        powertoolsMetrics(base.clusterName).count(
          alarm.MetricName ?? '',
          1,
          Object.keys(extra).length > 0 ? extra : undefined,
        );
        flushMetrics();
        const emf = printed.map(
          (line) =>
            JSON.parse(line) as Record<string, unknown> & {
              _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][] }[] };
            },
        );
        const metric = emf.find((e) => alarm.MetricName !== undefined && alarm.MetricName in e);
        expect(metric, alarm.MetricName).toBeDefined();
        expect(metric?._aws.CloudWatchMetrics[0]?.Namespace).toBe(alarm.Namespace);
        expect([...(metric?._aws.CloudWatchMetrics[0]?.Dimensions[0] ?? [])].sort()).toEqual(
          (alarm.Dimensions ?? []).map((d) => d.Name).sort(),
        );
        for (const d of alarm.Dimensions ?? []) expect(metric?.[d.Name], d.Name).toBe(d.Value);
      }
    } finally {
      write.mockRestore();
    }
    // Sustained only where short spells are normal.
    const periods = (name: string, cls = '') =>
      ours.find(
        (a) =>
          a.MetricName === name &&
          (a.Dimensions?.find((d) => d.Name === 'class')?.Value ?? '') === cls,
      )?.EvaluationPeriods;
    expect(periods('RetryableFailures', 'permission')).toBe(1);
    expect(periods('RetryableFailures', 'dependency')).toBe(3);
    expect(periods('NodeSyncFailures')).toBe(3);
    // A quiet forwarder is the absence of heartbeats: fewer than one, or none reported at all.
    const quiet = Object.values(template.findResources('AWS::CloudWatch::Alarm'))
      .map((a) => (a as { Properties: Record<string, unknown> }).Properties)
      .find((a) => a.MetricName === 'ForwarderHeartbeats');
    expect(quiet).toMatchObject({
      ComparisonOperator: 'LessThanThreshold',
      Threshold: 1,
      TreatMissingData: 'breaching',
      Statistic: 'Sum',
      Period: 300,
      EvaluationPeriods: 2,
    });
  });

  it('never allows elasticloadbalancing:*, ec2:* or *, and conditions ELBv2 and EC2 mutations on the ownership tag', () => {
    const { template } = synth();
    const statements = statementsOf(template, 'FunctionsRole');
    const all = Object.values(template.findResources('AWS::IAM::Policy')).flatMap(
      (p) =>
        (p as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties
          .PolicyDocument.Statement,
    );
    for (const s of all) {
      for (const action of actionsOf(s)) {
        expect(action).not.toMatch(/^(\*|elasticloadbalancing:\*|ec2:\*)$/);
      }
    }
    const documentedKeys = new Set([
      'aws:RequestTag/serverless-service-controller.io/cluster',
      'aws:ResourceTag/serverless-service-controller.io/cluster',
      'elasticloadbalancing:CreateAction',
      'ec2:CreateAction',
      'aws:TagKeys',
    ]);
    const mutating = (a: string) =>
      /^(elasticloadbalancing|ec2):/.test(a) && !/:(Describe|Get)/.test(a);
    // The only mutations without a tag condition, each narrowed otherwise.
    const unconditioned = new Map([['ec2:CreateSecurityGroup', 'vpc/vpc-0123abcd']]);
    for (const s of statements) {
      for (const action of actionsOf(s).filter(mutating)) {
        if (s.Condition === undefined) {
          expect(unconditioned.has(action), `${action} without a tag condition`).toBe(true);
          expect(JSON.stringify(s.Resource)).toContain(unconditioned.get(action));
          continue;
        }
        const keys = Object.values(s.Condition).flatMap((c) => Object.keys(c));
        expect(keys.length).toBeGreaterThan(0);
        for (const key of keys) expect(documentedKeys.has(key), key).toBe(true);
        expect(keys.some((k) => k.endsWith('serverless-service-controller.io/cluster'))).toBe(true);
        expect(JSON.stringify(s.Condition)).toContain('"demo"');
      }
    }
    // Tag changes on existing resources may not touch the ownership tags.
    const retags = statements.filter((s) =>
      actionsOf(s).some((a) => ['elasticloadbalancing:RemoveTags', 'ec2:DeleteTags'].includes(a)),
    );
    expect(retags).toHaveLength(2);
    for (const s of retags) {
      expect(s.Condition?.['ForAllValues:StringNotEquals']?.['aws:TagKeys']).toEqual(
        expect.arrayContaining([
          'serverless-service-controller.io/cluster',
          'serverless-service-controller.io/service-uid',
        ]),
      );
    }
    // Creation is only allowed with the tag on the request.
    const creates = statements.filter((s) =>
      actionsOf(s).some((a) =>
        [
          'elasticloadbalancing:CreateLoadBalancer',
          'elasticloadbalancing:CreateTargetGroup',
        ].includes(a),
      ),
    );
    expect(creates).toHaveLength(1);
    expect(creates[0]?.Condition?.StringEquals).toEqual({
      'aws:RequestTag/serverless-service-controller.io/cluster': 'demo',
    });
  });

  it('places the functions in the given subnets with network-interface permissions', () => {
    const { template } = synth({
      functionSubnetIds: 'subnet-0123456789abcdef0,subnet-0fedcba9876543210',
    });
    template.allResourcesProperties('AWS::Lambda::Function', {
      VpcConfig: {
        SubnetIds: ['subnet-0123456789abcdef0', 'subnet-0fedcba9876543210'],
        SecurityGroupIds: Match.anyValue(),
      },
    });
    const actions = statementsOf(template, 'FunctionsRole').flatMap(actionsOf);
    expect(actions).toContain('ec2:CreateNetworkInterface');
  });

  it('allows the NLBs on the pod ports of ip targets the settings name, and on no other', () => {
    const { template } = synth({
      nodeSecurityGroupIds: 'sg-0123456789abcdef0',
      podTargetPorts: '8080, 9000-9100',
    });
    const rules = Object.values(template.findResources('AWS::EC2::SecurityGroupIngress'))
      .map(
        (r) =>
          (
            r as {
              Properties: {
                IpProtocol: string;
                FromPort: number;
                ToPort: number;
                Description?: string;
              };
            }
          ).Properties,
      )
      .filter((r) => r.Description?.endsWith('from serverless-service-controller NLBs') === true)
      .map((r) => `${r.IpProtocol} ${r.FromPort}-${r.ToPort}`)
      .sort();
    expect(rules).toEqual([
      'tcp 10256-10256',
      'tcp 30000-32767',
      'tcp 8080-8080',
      'tcp 9000-9100',
      'udp 30000-32767',
      'udp 8080-8080',
      'udp 9000-9100',
    ]);
    expect(() => synth({ podTargetPorts: '9100-9000' })).toThrow(
      /podTargetPorts: 9100-9000 is not a port range/,
    );
  });

  it('on EKS without nodeSecurityGroupIds, allows the NLBs on the cluster security group, read with eks:DescribeCluster at deploy, and passes cdk-nag', () => {
    const { app, template } = synth({ nodeSecurityGroupIds: '' });
    const lookups = template.findResources('Custom::AWS');
    expect(Object.keys(lookups)).toHaveLength(1);
    const [lookupId, lookup] = Object.entries(lookups)[0]!;
    const create = JSON.stringify(
      (lookup as { Properties: { Create: unknown } }).Properties.Create,
    );
    expect(create).toContain('DescribeCluster');
    expect(create).toContain('demo');
    const rules = Object.values(template.findResources('AWS::EC2::SecurityGroupIngress')).map(
      (r) => (r as { Properties: { GroupId: unknown; FromPort: number } }).Properties,
    );
    expect(rules.map((r) => r.FromPort).sort()).toEqual([10256, 30000, 30000]);
    for (const rule of rules) {
      expect(rule.GroupId).toEqual({
        'Fn::GetAtt': [lookupId, 'cluster.resourcesVpcConfig.clusterSecurityGroupId'],
      });
    }
    // The lookup may describe this cluster only.
    const policies = JSON.stringify(template.findResources('AWS::IAM::Policy'));
    expect(policies).toMatch(/eks:DescribeCluster/);
    expect(new AwsSolutionsChecks().validateScope(app).violations).toEqual([]);
  });

  it('outside EKS, refuses to synthesise without nodeSecurityGroupIds, saying why', () => {
    const secret = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:kubeconfig-AbCdEf';
    expect(() => synth({ kubernetesSecretArn: secret, nodeSecurityGroupIds: '' })).toThrow(
      /nodeSecurityGroupIds: required outside EKS.*every target times out without one/,
    );
  });

  it('self-managed clusters: a kubeconfig secret instead of an access entry, and a send-only policy for the forwarder', () => {
    const secret = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:kubeconfig-AbCdEf';
    const { template } = synth({ kubernetesSecretArn: secret });
    template.resourceCountIs('AWS::EKS::AccessEntry', 0);
    template.resourceCountIs('AWS::EKS::PodIdentityAssociation', 0);
    const statements = statementsOf(template, 'FunctionsRole');
    expect(statements).toContainEqual(
      expect.objectContaining({ Action: 'secretsmanager:GetSecretValue', Resource: secret }),
    );
    template.hasResourceProperties('AWS::IAM::ManagedPolicy', {
      PolicyDocument: { Statement: [Match.objectLike({ Action: 'sqs:SendMessage' })] },
    });
  });

  it('a kubeconfig secret under a customer-managed key: kms:Decrypt on that key, through Secrets Manager only', () => {
    const secret = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:kubeconfig-AbCdEf';
    const key = 'arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';
    const { template } = synth({ kubernetesSecretArn: secret, kubernetesSecretKmsKeyArn: key });
    const kms = statementsOf(template, 'FunctionsRole').filter((s) =>
      actionsOf(s).some((a) => a.startsWith('kms:')),
    );
    expect(kms).toHaveLength(1);
    expect(kms[0]).toMatchObject({ Action: 'kms:Decrypt', Resource: key });
    expect(JSON.stringify(kms[0]?.Condition)).toMatch(
      /"StringEquals":\{"kms:ViaService":\{"Fn::Join":\["",\["secretsmanager\.",\{"Ref":"AWS::Region"\},"\.amazonaws\.com"\]\]\}\}/,
    );
    // Without a key, no KMS grant at all; a key without a secret is refused at synth.
    const plain = synth({ kubernetesSecretArn: secret }).template;
    expect(
      statementsOf(plain, 'FunctionsRole')
        .flatMap(actionsOf)
        .filter((a) => a.startsWith('kms:')),
    ).toEqual([]);
    expect(() => synth({ kubernetesSecretKmsKeyArn: key })).toThrow(
      /kubernetesSecretKmsKeyArn: only with kubernetesSecretArn/,
    );
  });

  it('IRSA: the forwarder role trusts the cluster OIDC provider for its ServiceAccount only', () => {
    const issuer = 'https://oidc.eks.us-east-1.amazonaws.com/id/ABC';
    const { template } = synth({
      forwarderIdentity: 'irsa',
      oidcProviderArn:
        'arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/ABC',
      oidcIssuer: issuer,
    });
    template.hasResourceProperties('AWS::IAM::Role', {
      AssumeRolePolicyDocument: {
        Statement: [
          Match.objectLike({
            Action: 'sts:AssumeRoleWithWebIdentity',
            Condition: {
              StringEquals: {
                'oidc.eks.us-east-1.amazonaws.com/id/ABC:sub': `system:serviceaccount:${forwarderNamespace}:${forwarderServiceAccount}`,
                'oidc.eks.us-east-1.amazonaws.com/id/ABC:aud': 'sts.amazonaws.com',
              },
            },
          }),
        ],
      },
    });
  });

  it('rejects bad or missing settings with one error naming each', () => {
    expect(() =>
      settingsFromContext((key) => ({ vpcId: 'not-a-vpc', nodeSyncPeriodSeconds: '30' })[key]),
    ).toThrow(/clusterName[\s\S]*vpcId[\s\S]*nodeSyncPeriodSeconds/);
    expect(() => createApp(new App({ context: { vpcId: 'vpc-0123abcd' } }))).toThrow(
      /invalid settings[\s\S]*clusterName/,
    );
  });

  it('the README documents every setting the app reads, and no other', () => {
    const readme = readFileSync('README.md', 'utf8');
    const section = readme.slice(
      readme.indexOf('## Install on AWS'),
      readme.indexOf('### Uninstall'),
    );
    const documented = new Set(
      [...section.matchAll(/^\| (`[^|]+`) +\|/gm)].flatMap((m) =>
        [...(m[1] ?? '').matchAll(/`([A-Za-z0-9]+)`/g)].map((n) => n[1]),
      ),
    );
    documented.delete('setting');
    expect([...documented].sort()).toEqual([...settingNames].sort());
  });

  it('grants eks:DescribeCluster on the cluster only when the endpoint and CA are not both given', () => {
    const describe = (context: Record<string, unknown>) =>
      statementsOf(synth(context).template, 'FunctionsRole').filter((s) =>
        actionsOf(s).includes('eks:DescribeCluster'),
      );
    const [lookup] = describe({});
    expect(JSON.stringify(lookup?.Resource)).toContain(':cluster/demo');
    expect(
      describe({
        clusterEndpoint: 'https://ABC.gr7.us-east-1.eks.amazonaws.com',
        clusterCertificateAuthorityData: 'LS0tLS1CRUdJTg==',
      }),
    ).toEqual([]);
    expect(() => synth({ clusterEndpoint: 'https://ABC.gr7.us-east-1.eks.amazonaws.com' })).toThrow(
      /give both or neither/,
    );
  });

  it('refuses a partial secret ARN, which IAM would match to no secret', () => {
    expect(() =>
      synth({
        kubernetesSecretArn: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:kubeconfig',
      }),
    ).toThrow(/six-character suffix/);
  });

  it('k8s:configure writes the forwarder configuration and image from the stack outputs', () => {
    const dir = mkdtempSync(join(tmpdir(), 'k8s-'));
    const files = { config: join(dir, 'controller.json'), kustomization: join(dir, 'k.yaml') };
    writeFileSync(files.kustomization, readFileSync('infra/k8s/kustomization.yaml', 'utf8'));
    const config = sampleForwarderConfig;
    const image =
      '123456789012.dkr.ecr.eu-west-1.amazonaws.com/cdk-hnb659fds-container-assets:abc123';
    configureKustomization(
      {
        'ServerlessServiceController-demo': {
          ForwarderConfig: JSON.stringify(config),
          ForwarderImageUri: image,
        },
      },
      files,
    );
    expect(JSON.parse(readFileSync(files.config, 'utf8'))).toMatchObject(config);
    const kustomization = readFileSync(files.kustomization, 'utf8');
    expect(kustomization).toContain(
      'newName: 123456789012.dkr.ecr.eu-west-1.amazonaws.com/cdk-hnb659fds-container-assets',
    );
    expect(kustomization).toContain('newTag: abc123');
    expect(kustomization).not.toContain('digest:');
    // A mirror of the base image, pinned by digest, replaces the tag.
    const mirror = `registry.example.com/mirror/nodejs24@sha256:${'a'.repeat(64)}`;
    configureKustomization(
      { 'ServerlessServiceController-demo': { ForwarderConfig: JSON.stringify(config) } },
      files,
      { image: mirror },
    );
    const mirrored = readFileSync(files.kustomization, 'utf8');
    expect(mirrored).toContain('newName: registry.example.com/mirror/nodejs24\n');
    expect(mirrored).toContain(`digest: sha256:${'a'.repeat(64)}`);
    expect(mirrored).not.toContain('newTag:');
    expect(() => configureKustomization({}, files)).toThrow(/found 0/);
    // A ServiceController construct in a stack of one's own: output IDs carry its path and a hash.
    configureKustomization(
      {
        Platform: {
          ClusterEndpoint: 'https://example.com',
          LbForwarderConfig0A1B2C3D: JSON.stringify({ ...config, clusterName: 'platform' }),
          LbForwarderImageUri9F8E7D6C: `${image.split(':')[0]}:def456`,
        },
      },
      files,
    );
    expect(JSON.parse(readFileSync(files.config, 'utf8'))).toMatchObject({
      clusterName: 'platform',
    });
    expect(readFileSync(files.kustomization, 'utf8')).toContain('newTag: def456');
    expect(() =>
      configureKustomization(
        {
          Platform: {
            BlueForwarderConfig0A1B2C3D: JSON.stringify(config),
            GreenForwarderConfig0A1B2C3D: JSON.stringify(config),
          },
        },
        files,
      ),
    ).toThrow(/found 2 \(Platform\.BlueForwarderConfig0A1B2C3D, Platform\.GreenForwarderConfig/);
  });

  it('builds no image by default, so a deploy needs no Docker; forwarderImageBuild builds one for the platform asked', () => {
    const dockerImages = (context: Record<string, unknown>) => {
      const { app, stack, template } = synth(context);
      const assembly = app.synth();
      const manifest = JSON.parse(
        readFileSync(join(assembly.directory, `${stack.artifactId}.assets.json`), 'utf8'),
      ) as { dockerImages?: Record<string, { source: { platform?: string } }> };
      return {
        images: Object.values(manifest.dockerImages ?? {}).map((i) => i.source.platform),
        outputs: Object.keys(template.findOutputs('*')),
      };
    };
    const plain = dockerImages({});
    expect(plain.images).toEqual([]);
    expect(plain.outputs).not.toContain('ForwarderImageUri');
    const built = dockerImages({ forwarderImageBuild: 'linux/amd64' });
    expect(built.images).toEqual(['linux/amd64']);
    expect(built.outputs).toContain('ForwarderImageUri');
    expect(() => synth({ forwarderImageBuild: 'x86' })).toThrow(/forwarderImageBuild/);
  }, 60_000);

  describe('lifecycle events bus (lifecycleEventBus)', () => {
    /** The functions' configuration as deployed: the literal parts of CONTROLLER_CONFIG. */
    function configText(template: Template): string {
      const fn = Object.values(template.findResources('AWS::Lambda::Function'))[0] as {
        Properties: { Environment: { Variables: { CONTROLLER_CONFIG: unknown } } };
      };
      const value = fn.Properties.Environment.Variables.CONTROLLER_CONFIG;
      if (typeof value === 'string') return value;
      const parts = (value as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1];
      return parts.map((p) => (typeof p === 'string' ? p : '<token>')).join('');
    }
    const putEvents = (template: Template) =>
      statementsOf(template, 'FunctionsRole').filter((s) =>
        actionsOf(s).includes('events:PutEvents'),
      );

    it('is off by default: no bus, no events:PutEvents, nothing in the configuration', () => {
      const { template } = synth();
      template.resourceCountIs('AWS::Events::EventBus', 0);
      expect(putEvents(template)).toEqual([]);
      expect(configText(template)).not.toContain('lifecycleEvents');
    });

    it('default: PutEvents on the default bus only', () => {
      const { template } = synth({ lifecycleEventBus: 'default' });
      const [statement, ...others] = putEvents(template);
      expect(others).toEqual([]);
      expect(actionsOf(statement!)).toEqual(['events:PutEvents']);
      expect(JSON.stringify(statement!.Resource)).toMatch(/:event-bus\/default"/);
      expect(configText(template)).toContain('"lifecycleEvents":{"busName":"default"}');
      template.hasOutput('LifecycleEventBusName', { Value: 'default' });
    });

    it('create: a bus of its own, PutEvents on that bus only, and its name in the configuration', () => {
      const { template, app } = synth({ lifecycleEventBus: 'create' });
      template.hasResourceProperties('AWS::Events::EventBus', {
        Name: 'demo-service-controller',
      });
      const busId = Object.keys(template.findResources('AWS::Events::EventBus'))[0];
      const [statement, ...others] = putEvents(template);
      expect(others).toEqual([]);
      expect(statement!.Resource).toEqual({ 'Fn::GetAtt': [busId, 'Arn'] });
      expect(configText(template)).toContain(
        '"lifecycleEvents":{"busName":"demo-service-controller"}',
      );
      expect(new AwsSolutionsChecks().validateScope(app).violations).toEqual([]);
    });

    it('rejects any other value', () => {
      expect(() => synth({ lifecycleEventBus: 'my-bus' })).toThrow(/lifecycleEventBus/);
    });
  });
});

describe('settings that synth would accept but a deploy would refuse', () => {
  const valid = { clusterName: 'demo', vpcId: 'vpc-0123abcd' };
  const context = (values: Record<string, unknown>) => (key: string) => values[key];

  it('gives an EKS cluster name with "_" or "." a stack name CloudFormation accepts, unique per cluster', () => {
    expect(stackNameFor('demo')).toBe('ServerlessServiceController-demo');
    const underscored = stackNameFor('team_a.prod');
    expect(underscored).toMatch(/^ServerlessServiceController-team-a-prod-[0-9a-f]{8}$/);
    expect(underscored).not.toBe(stackNameFor('team-a-prod'));
    expect(underscored).not.toBe(stackNameFor('team.a_prod'));
    const longest = stackNameFor(`a${'_'.repeat(99)}`);
    expect(longest.length).toBeLessThanOrEqual(128);
    expect(longest).toMatch(/^[A-Za-z][A-Za-z0-9-]*$/);
    expect(synth({ clusterName: 'team_a' }).stack.stackName).toBe(stackNameFor('team_a'));
  });

  it('refuses a configuration that cannot fit Lambda’s 4 KB environment, saying what to shorten', () => {
    const caData = Buffer.from('-'.repeat(1500)).toString('base64');
    const endpoint = 'https://ABCDEF0123456789.gr7.us-east-1.eks.amazonaws.com';
    expect(() =>
      settingsFromContext(
        context({ ...valid, clusterEndpoint: endpoint, clusterCertificateAuthorityData: caData }),
      ),
    ).not.toThrow();
    const tags = Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [`team.example.com/tag-${i}`, 'x'.repeat(20)]),
    );
    expect(() =>
      settingsFromContext(
        context({
          ...valid,
          clusterEndpoint: endpoint,
          clusterCertificateAuthorityData: caData,
          defaultTags: tags,
        }),
      ),
    ).toThrow(
      /may reach \d+ bytes, over Lambda's 4096-byte environment limit.*shorten defaultTags/,
    );
  });

  it('names every problem at once, the combinations included', () => {
    let message = '';
    try {
      settingsFromContext(
        context({
          ...valid,
          clusterEndpoint: 'https://example.com',
          forwarderIdentity: 'irsa',
          kubernetesSecretKmsKeyArn: 'arn:aws:kms:us-east-1:123456789012:key/abc',
        }),
      );
    } catch (error) {
      message = String(error);
    }
    expect(message).toContain(
      'clusterEndpoint, clusterCertificateAuthorityData: give both or neither',
    );
    expect(message).toContain('oidcProviderArn, oidcIssuer: both required');
    expect(message).toContain('kubernetesSecretKmsKeyArn: only with kubernetesSecretArn');
  });
});
