import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../infra/app';

/**
 * The logical IDs of release 0.1's standalone stack, recorded from its synthesised templates
 * before the stack became a user of the ServiceController construct. CloudFormation replaces a
 * resource whose logical ID changes: a new, empty state table (the old one retained but no longer
 * read), new queues (messages in flight lost), a new backend security group (NLBs still carrying
 * the old one), a second dashboard with the same name (the update fails).
 */
const release01 = JSON.parse(
  readFileSync(new URL('./release-0.1-logical-ids.json', import.meta.url), 'utf8'),
) as {
  variants: { context: Record<string, string>; logicalIds: string[]; outputs: string[] }[];
};

function synth(context: Record<string, string>) {
  const app = new App({
    outdir: mkdtempSync(join(tmpdir(), 'cdk-')),
    context: {
      clusterName: 'demo',
      vpcId: 'vpc-0123abcd',
      ...context,
      'aws:cdk:bundling-stacks': [],
    },
  });
  return Template.fromStack(createApp(app).stack).toJSON() as {
    Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }>;
    Outputs: Record<string, unknown>;
  };
}

describe('upgrading the standalone app from release 0.1', { timeout: 60_000 }, () => {
  it.each(release01.variants.map((v) => [JSON.stringify(v.context), v] as const))(
    'keeps every logical ID and output of release 0.1 (context %s)',
    (_, variant) => {
      const template = synth(variant.context);
      const missing = variant.logicalIds.filter((id) => !(id in template.Resources));
      expect(missing).toEqual([]);
      expect(Object.keys(template.Outputs)).toEqual(expect.arrayContaining(variant.outputs));
    },
  );

  it('keeps the state table, the queues and the DLQ in place, by name', () => {
    const { Resources } = synth({});
    const typeOf = (id: string) => Resources[id]?.Type;
    expect(typeOf('StateTable9728C7E5')).toBe('AWS::DynamoDB::Table');
    expect(typeOf('WorkQueue94013F35')).toBe('AWS::SQS::Queue');
    expect(typeOf('DeadLetterQueue9F481546')).toBe('AWS::SQS::Queue');
    expect(typeOf('BackendSecurityGroup96CF32F1')).toBe('AWS::EC2::SecurityGroup');
    // Properties whose change replaces the resource stay as release 0.1 set them.
    expect(Resources.BackendSecurityGroup96CF32F1?.Properties?.GroupDescription).toBe(
      'NLBs of serverless-service-controller for demo',
    );
    expect(Resources.MonitoringDashboard0C3675C6?.Properties?.DashboardName).toBe(
      'ServerlessServiceController-demo-controller',
    );
  });
});
