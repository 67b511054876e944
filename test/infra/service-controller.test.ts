import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as eks from 'aws-cdk-lib/aws-eks';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { AwsSolutionsChecks } from 'cdk-nag';
import { describe, expect, it } from 'vitest';
import { synthOnlyEksCluster } from '../support/eks-cluster';
import { parseConfig } from '../../functions/contract/controller-config';
import { ServiceController, type ServiceControllerProps } from '../../infra/index';

/** A platform team's stack: an EKS cluster of its own, and the controller beside it. */
function sampleApp(props: Omit<ServiceControllerProps, 'cluster'> = {}) {
  const app = new App({
    outdir: mkdtempSync(join(tmpdir(), 'cdk-')),
    context: { 'aws:cdk:bundling-stacks': [] },
  });
  const stack = new Stack(app, 'Platform', {
    env: { account: '123456789012', region: 'eu-west-1' },
  });
  const cluster = synthOnlyEksCluster(stack);
  const controller = new ServiceController(stack, 'Lb', { cluster, ...props });
  return { app, stack, cluster, controller, template: Template.fromStack(stack) };
}

type Json = unknown;
/** CONTROLLER_CONFIG of each function, as CloudFormation will join it. */
function controllerConfigs(template: Template): Json[] {
  return Object.values(template.findResources('AWS::Lambda::Function'))
    .map(
      (fn) =>
        (fn as { Properties: { Environment?: { Variables?: { CONTROLLER_CONFIG?: Json } } } })
          .Properties.Environment?.Variables?.CONTROLLER_CONFIG,
    )
    .filter((value) => value !== undefined);
}

/** Joins an Fn::Join as CloudFormation would, with `resolve` giving each reference's value. */
function render(value: Json, resolve: (reference: Json) => string): string {
  if (typeof value === 'string') return value;
  const join = (value as { 'Fn::Join'?: [string, Json[]] })['Fn::Join'];
  if (join === undefined) return resolve(value);
  return join[1].map((part) => render(part, resolve)).join(join[0]);
}

function clusterId(template: Template): string {
  const ids = Object.keys(template.findResources('Custom::AWSCDK-EKS-Cluster'));
  expect(ids).toHaveLength(1);
  return ids[0]!;
}

// An eks.Cluster synthesises its own providers: slower than the controller alone.
describe('ServiceController, the construct for stacks of your own', { timeout: 120_000 }, () => {
  it('takes the endpoint, CA, VPC and cluster security group from an eks.Cluster, as tokens that render into valid JSON', () => {
    const { template } = sampleApp();
    const cluster = clusterId(template);
    const vpc = Object.keys(template.findResources('AWS::EC2::VPC'))[0]!;
    const configs = controllerConfigs(template);
    expect(configs).toHaveLength(3);
    const text = JSON.stringify(configs[0]);
    for (const attribute of ['Endpoint', 'CertificateAuthorityData']) {
      expect(text).toContain(JSON.stringify({ 'Fn::GetAtt': [cluster, attribute] }));
    }
    expect(text).toContain(JSON.stringify({ Ref: vpc }));
    expect(text).toContain(JSON.stringify({ Ref: cluster }));

    // What the functions will read once deployed: CloudFormation's values in place of the tokens.
    const deployed = (reference: Json): string => {
      const json = JSON.stringify(reference);
      if (json === JSON.stringify({ Ref: cluster })) return 'platform-cluster';
      if (json === JSON.stringify({ Ref: vpc })) return 'vpc-0123456789abcdef0';
      if (json.includes('"Endpoint"')) return 'https://ABCDEF.gr7.eu-west-1.eks.amazonaws.com';
      if (json.includes('CertificateAuthorityData')) return 'LS0tLS1CRUdJTi0tLS0t';
      if (json.includes('GroupId')) return 'sg-0123456789abcdef0';
      if (json.includes('Queue')) return 'https://sqs.eu-west-1.amazonaws.com/123456789012/q';
      if (json.includes('Table')) return 'Platform-LbStateTable-ABC';
      throw new Error(`no deployed value for ${json}`);
    };
    for (const config of configs) {
      const parsed = parseConfig(JSON.parse(render(config, deployed)));
      expect(parsed.clusterName).toBe('platform-cluster');
      expect(parsed.aws.vpcId).toBe('vpc-0123456789abcdef0');
      expect(parsed.kubernetes).toEqual({
        mode: 'eks',
        clusterName: 'platform-cluster',
        endpoint: 'https://ABCDEF.gr7.eu-west-1.eks.amazonaws.com',
        certificateAuthorityData: 'LS0tLS1CRUdJTi0tLS0t',
      });
      expect(parsed.nodeQueueUrl).toBeDefined();
    }
    // Endpoint and CA known: the functions need no eks:DescribeCluster, and the stack no lookup.
    const ours = Object.entries(template.findResources('AWS::IAM::Policy')).filter(([id]) =>
      id.startsWith('Lb'),
    );
    expect(ours.length).toBeGreaterThan(0);
    expect(JSON.stringify(ours)).not.toContain('eks:DescribeCluster');
    template.resourceCountIs('Custom::AWS', 0);
  });

  it('lets the NLBs reach the nodes through the cluster security group, in the cluster VPC', () => {
    const { template } = sampleApp();
    const cluster = clusterId(template);
    const vpc = Object.keys(template.findResources('AWS::EC2::VPC'))[0]!;
    const clusterGroup = { 'Fn::GetAtt': [cluster, 'ClusterSecurityGroupId'] };
    const ingress = Object.values(template.findResources('AWS::EC2::SecurityGroupIngress'))
      .map((r) => (r as { Properties: { GroupId: Json; FromPort: number } }).Properties)
      .filter((r) => JSON.stringify(r.GroupId) === JSON.stringify(clusterGroup));
    expect(ingress.map((r) => r.FromPort).sort()).toEqual([10256, 30000, 30000]);
    const backend = Object.entries(template.findResources('AWS::EC2::SecurityGroup')).find(([id]) =>
      id.startsWith('LbBackendSecurityGroup'),
    )?.[1] as { Properties: { VpcId: Json } } | undefined;
    expect(backend?.Properties.VpcId).toEqual({ Ref: vpc });
    template.hasResourceProperties('AWS::EKS::AccessEntry', { ClusterName: { Ref: cluster } });
    template.hasResourceProperties('AWS::EKS::PodIdentityAssociation', {
      ClusterName: { Ref: cluster },
    });
  });

  it('outputs the forwarder configuration under its construct path, with the queues resolved', () => {
    const { template, controller, stack } = sampleApp();
    const outputs = template.findOutputs('*') as Record<string, { Value: Json }>;
    const key = Object.keys(outputs).find((id) => /^LbForwarderConfig[0-9A-F]{8}$/.test(id));
    expect(key).toBeDefined();
    expect(stack.resolve(controller.forwarderConfig)).toEqual(outputs[key!]?.Value);
    expect(JSON.stringify(outputs[key!]?.Value)).toContain('nodeQueueUrl');
  });

  it('checks its props with the app’s rules, naming each problem, and lets deploy-time values through', () => {
    expect(() =>
      sampleApp({ nodeSyncPeriodSeconds: 30, defaultScheme: 'public' as never }),
    ).toThrow(
      /invalid ServiceController settings:[\s\S]*nodeSyncPeriodSeconds[\s\S]*defaultScheme/,
    );
    expect(() =>
      sampleApp({ clusterEndpoint: 'https://ABCDEF.gr7.eu-west-1.eks.amazonaws.com' }),
    ).toThrow(/clusterEndpoint, clusterCertificateAuthorityData: give both or neither/);
    const standalone = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'S');
    expect(() => new ServiceController(standalone, 'Lb', {})).toThrow(/clusterName[\s\S]*vpcId/);
    // A topic made in the same app: its ARN is a token until deploy.
    const withTopic = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'T');
    const topic = new Topic(withTopic, 'Oncall');
    new ServiceController(withTopic, 'Lb', {
      clusterName: 'demo',
      vpcId: 'vpc-0123abcd',
      nodeSecurityGroupIds: ['sg-0123456789abcdef0'],
      alarmTopicArn: topic.topicArn,
    });
    const alarms = Template.fromStack(withTopic).findResources('AWS::CloudWatch::Alarm');
    for (const alarm of Object.values(alarms)) {
      expect((alarm as { Properties: { AlarmActions: Json } }).Properties.AlarmActions).toEqual([
        { Ref: Object.keys(Template.fromStack(withTopic).findResources('AWS::SNS::Topic'))[0] },
      ]);
    }
  });

  it('takes an imported cluster, reading only the attributes the settings leave out', () => {
    const stack = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Imported', {
      env: { account: '123456789012', region: 'eu-west-1' },
    });
    // Imported by name only: its VPC, security group, endpoint and CA throw when read.
    const cluster = eks.Cluster.fromClusterAttributes(stack, 'Cluster', { clusterName: 'prod' });
    new ServiceController(stack, 'Lb', {
      cluster,
      vpcId: 'vpc-0123abcd',
      nodeSecurityGroupIds: ['sg-0123456789abcdef0'],
      clusterEndpoint: 'https://ABCDEF.gr7.eu-west-1.eks.amazonaws.com',
      clusterCertificateAuthorityData: 'LS0tLS1CRUdJTg==',
    });
    const [config] = controllerConfigs(Template.fromStack(stack));
    expect(JSON.stringify(config)).toContain('prod');
    expect(JSON.stringify(config)).toContain('vpc-0123abcd');
  });

  it('is what the README installs first, before the standalone app', () => {
    const readme = readFileSync('README.md', 'utf8');
    const install = readme.slice(
      readme.indexOf('## Install on AWS'),
      readme.indexOf('### Uninstall'),
    );
    const construct = install.indexOf("new ServiceController(this, 'Lb', { cluster");
    expect(construct).toBeGreaterThan(-1);
    expect(install.indexOf('npx cdk deploy -c clusterName=')).toBeGreaterThan(construct);
  });

  it('has no unacknowledged cdk-nag finding of its own', () => {
    const { controller } = sampleApp();
    const violations = new AwsSolutionsChecks().validateScope(controller).violations;
    expect(
      violations.map((v) => [v.ruleName, v.violatingResources.map((r) => r.resourceLogicalId)]),
    ).toEqual([]);
  });
});
