import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { AccountPrincipal, Role } from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../infra/app';
import { ServiceController } from '../../infra/index';

/**
 * Who may put messages on the controller's queues (issue 32, finding 10): with
 * restrictQueueSenders, an explicit deny keeps every principal of the account but the functions,
 * the forwarder and the named ARNs from forging work or the forwarder's heartbeats. And the
 * kubeconfig secret's insecure-connection opt-in (finding 8) as the stack passes it on.
 */
const base = {
  clusterName: 'demo',
  vpcId: 'vpc-0123abcd',
  nodeSecurityGroupIds: 'sg-0123456789abcdef0',
};
const secret = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:kubeconfig-AbCdEf';

function synth(context: Record<string, unknown> = {}) {
  const app = new App({
    outdir: mkdtempSync(join(tmpdir(), 'cdk-')),
    context: { ...base, ...context, 'aws:cdk:bundling-stacks': [] },
  });
  const { stack } = createApp(app);
  return { app, stack, template: Template.fromStack(stack) };
}

interface PolicyResource {
  Properties: {
    Queues: unknown[];
    PolicyDocument: { Statement: Record<string, unknown>[] };
  };
}

function logicalIdOf(template: Template, type: string, prefix: string): string {
  const ids = Object.keys(template.findResources(type)).filter((id) => id.includes(prefix));
  expect(ids).toHaveLength(1);
  return ids[0] ?? '';
}

/** The sender restriction on the queue whose logical ID starts with `prefix`, if any. */
function senderDeny(template: Template, prefix: string): Record<string, unknown> | undefined {
  const queue = logicalIdOf(template, 'AWS::SQS::Queue', prefix);
  const policies = Object.values(
    template.findResources('AWS::SQS::QueuePolicy'),
  ) as PolicyResource[];
  const policy = policies.find(
    (p) => JSON.stringify(p.Properties.Queues) === JSON.stringify([{ Ref: queue }]),
  );
  return policy?.Properties.PolicyDocument.Statement.find((s) => s.Sid === 'OnlyControllerSends');
}

const arnOf = (template: Template, prefix: string) => ({
  'Fn::GetAtt': [logicalIdOf(template, 'AWS::IAM::Role', prefix), 'Arn'],
});

describe('restrictQueueSenders', { timeout: 120_000 }, () => {
  it('is off by default: no sender restriction, any principal whose IAM policies allow it may send', () => {
    const { template } = synth();
    expect(senderDeny(template, 'WorkQueue')).toBeUndefined();
    expect(senderDeny(template, 'NodeQueue')).toBeUndefined();
  });

  it('denies sqs:SendMessage on the work and node queues to all but the functions and the forwarder role', () => {
    const { template } = synth({ restrictQueueSenders: 'true' });
    for (const queue of ['WorkQueue', 'NodeQueue']) {
      expect(senderDeny(template, queue)).toEqual({
        Sid: 'OnlyControllerSends',
        Effect: 'Deny',
        Principal: { AWS: '*' },
        Action: 'sqs:SendMessage',
        Resource: { 'Fn::GetAtt': [logicalIdOf(template, 'AWS::SQS::Queue', queue), 'Arn'] },
        Condition: {
          ArnNotLike: {
            'aws:PrincipalArn': [
              arnOf(template, 'FunctionsRole'),
              arnOf(template, 'ForwarderRole'),
            ],
          },
        },
      });
    }
    // Only SQS's redrive and the functions put messages on the DLQ: left as it is.
    expect(senderDeny(template, 'DeadLetterQueue')).toBeUndefined();
  });

  it('outside EKS, allows the forwarder identity and operators named by queueSenderArns', () => {
    const forwarderUser = 'arn:aws:iam::123456789012:user/serverless-service-controller-forwarder';
    const operators =
      'arn:aws:iam::123456789012:role/aws-reserved/sso.amazonaws.com/*/AWSReservedSSO_Admin_*';
    const { template } = synth({
      kubernetesSecretArn: secret,
      restrictQueueSenders: 'true',
      queueSenderArns: `${forwarderUser},${operators}`,
    });
    expect(senderDeny(template, 'WorkQueue')?.Condition).toEqual({
      ArnNotLike: {
        'aws:PrincipalArn': [arnOf(template, 'FunctionsRole'), forwarderUser, operators],
      },
    });
  });

  it('the construct takes a role of the same app (a deploy-time ARN) as a sender', () => {
    const app = new App({
      outdir: mkdtempSync(join(tmpdir(), 'cdk-')),
      context: { 'aws:cdk:bundling-stacks': [] },
    });
    const stack = new Stack(app, 'Platform', {
      env: { account: '123456789012', region: 'eu-west-1' },
    });
    const forwarder = new Role(stack, 'OwnForwarderRole', {
      assumedBy: new AccountPrincipal('123456789012'),
    });
    new ServiceController(stack, 'Lb', {
      ...base,
      nodeSecurityGroupIds: [base.nodeSecurityGroupIds],
      forwarderIdentity: 'none',
      restrictQueueSenders: true,
      queueSenderArns: [forwarder.roleArn],
    });
    const template = Template.fromStack(stack);
    expect(senderDeny(template, 'WorkQueue')?.Condition).toEqual({
      ArnNotLike: {
        'aws:PrincipalArn': [arnOf(template, 'FunctionsRole'), arnOf(template, 'OwnForwarderRole')],
      },
    });
  });

  it('passes cdk-nag with the restriction on', () => {
    const { app } = synth({ restrictQueueSenders: 'true' });
    expect(new AwsSolutionsChecks().validateScope(app).violations).toEqual([]);
  });

  it('refuses settings that would lock the forwarder out or do nothing', () => {
    expect(() => synth({ kubernetesSecretArn: secret, restrictQueueSenders: 'true' })).toThrow(
      /queueSenderArns: required with restrictQueueSenders and forwarderIdentity=none/,
    );
    expect(() => synth({ queueSenderArns: 'arn:aws:iam::123456789012:role/operators' })).toThrow(
      /queueSenderArns: only with restrictQueueSenders=true/,
    );
    // aws:PrincipalArn is the role's ARN, never an assumed-role session's.
    expect(() =>
      synth({
        restrictQueueSenders: 'true',
        queueSenderArns: 'arn:aws:sts::123456789012:assumed-role/operators/alice',
      }),
    ).toThrow(/queueSenderArns\.0: an IAM role or user ARN/);
  });
});

describe('kubernetesAllowInsecureConnection', { timeout: 120_000 }, () => {
  function functionsConfig(template: Template): string {
    const fn = Object.values(template.findResources('AWS::Lambda::Function')).find((f) =>
      JSON.stringify(f).includes('CONTROLLER_CONFIG'),
    );
    return JSON.stringify(fn);
  }

  it('is off by default; when set, the functions are told and synth warns', () => {
    const plain = synth({ kubernetesSecretArn: secret });
    expect(functionsConfig(plain.template)).not.toContain('allowInsecureConnection');
    expect(
      Annotations.fromStack(plain.stack).findWarning('*', Match.stringLikeRegexp('Insecure')),
    ).toEqual([]);

    const opted = synth({ kubernetesSecretArn: secret, kubernetesAllowInsecureConnection: 'true' });
    expect(functionsConfig(opted.template)).toContain('\\"allowInsecureConnection\\":true');
    const warnings = Annotations.fromStack(opted.stack).findWarning(
      '*',
      Match.stringLikeRegexp('kubernetesAllowInsecureConnection: the functions accept'),
    );
    expect(warnings).toHaveLength(1);
  });

  it('is refused without a kubeconfig secret, and an EKS endpoint must be https', () => {
    expect(() => synth({ kubernetesAllowInsecureConnection: 'true' })).toThrow(
      /kubernetesAllowInsecureConnection: only with kubernetesSecretArn/,
    );
    expect(() =>
      synth({
        clusterEndpoint: 'http://ABC.gr7.us-east-1.eks.amazonaws.com',
        clusterCertificateAuthorityData: 'LS0tLS1CRUdJTg==',
      }),
    ).toThrow(/clusterEndpoint: an https URL/);
  });
});
