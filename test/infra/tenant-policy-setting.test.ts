import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Annotations, Match } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../functions/contract/controller-config';
import { controllerConfigFor, leaseSeconds } from '../../infra/controller-config';
import { createApp } from '../../infra/app';
import { settingsFromContext } from '../../infra/settings';

const valid = { clusterName: 'demo', vpcId: 'vpc-0123abcd' };
const context = (values: Record<string, unknown>) => (key: string) => values[key];
const policy = {
  rules: [{ name: 'tenants', namespaces: ['team-*'], internetFacing: false }],
  default: { maxLoadBalancerServices: 3 },
};
const resources = {
  region: 'eu-west-1',
  queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/work',
  nodeQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/node',
  deadLetterQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/dlq',
  tableName: 'state',
  leaseSeconds,
};

describe('the tenantPolicy deployment setting', () => {
  it('takes an object from cdk.json or JSON text from -c, and hands it to the functions', () => {
    for (const given of [policy, JSON.stringify(policy)]) {
      const settings = settingsFromContext(context({ ...valid, tenantPolicy: given }));
      const config = parseConfig(controllerConfigFor(settings, resources));
      expect(config.tenantPolicy).toEqual(policy);
    }
    const without = controllerConfigFor(settingsFromContext(context(valid)), resources);
    expect('tenantPolicy' in without).toBe(false);
  });

  it.each<[string, unknown, RegExp]>([
    ['text that is not JSON', '{rules:', /tenantPolicy: not JSON/],
    [
      'an unknown key',
      { rules: [{ namespaces: ['a'], internetFacng: true }] },
      /tenantPolicy\.rules\.0: Unrecognized key: "internetFacng"/,
    ],
    [
      'a bad certificate pattern',
      JSON.stringify({ default: { certificateArns: ['*'] } }),
      /tenantPolicy\.default\.certificateArns\.0: .*certificate ARN pattern/,
    ],
    [
      'a bad security group pattern',
      JSON.stringify({ default: { securityGroups: [''] } }),
      /tenantPolicy\.default\.securityGroups\.0: .*security group ID pattern .* or a Name tag pattern/,
    ],
  ])('refuses %s at synth, naming it', (_, given, expected) => {
    expect(() => settingsFromContext(context({ ...valid, tenantPolicy: given }))).toThrow(expected);
  });

  it('counts the policy against the functions’ 4 KB environment', () => {
    const large = {
      rules: Array.from({ length: 60 }, (_, i) => ({
        namespaces: [`team-${i}-with-a-long-name`],
        certificateArns: ['arn:aws:acm:*:123456789012:certificate/*'],
      })),
    };
    expect(() => settingsFromContext(context({ ...valid, tenantPolicy: large }))).toThrow(
      /tenantPolicy: .*over Lambda's 4096-byte environment limit.*shorten defaultTags or tenantPolicy/,
    );
  });
});

describe('a tenant policy that fails open', { timeout: 120_000 }, () => {
  /** The stack's synth warnings, function bundling skipped. */
  function synthWarnings(tenantPolicy: unknown) {
    const app = new App({
      outdir: mkdtempSync(join(tmpdir(), 'cdk-')),
      context: { ...valid, tenantPolicy, 'aws:cdk:bundling-stacks': [] },
    });
    return Annotations.fromStack(createApp(app).stack).findWarning(
      '*',
      Match.stringLikeRegexp('tenantPolicy has rules but no `default`'),
    );
  }

  it('is a synth warning when rules exist without a default, naming the deny default', () => {
    const found = synthWarnings({ rules: policy.rules });
    expect(found).toHaveLength(1);
    expect(JSON.stringify(found[0]?.entry.data)).toContain('maxLoadBalancerServices');
    expect(synthWarnings(policy)).toEqual([]);
  });
});
