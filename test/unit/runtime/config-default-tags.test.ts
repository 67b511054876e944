import { describe, expect, it } from 'vitest';
import { ConfigurationError, parseConfig } from '../../../functions/contract/controller-config';

function withDefaultTags(defaultTags: Record<string, string>): unknown {
  return {
    clusterName: 'prod-eu',
    region: 'eu-west-1',
    queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/work',
    tableName: 'controller-state',
    aws: { vpcId: 'vpc-0a1b2c3d', defaultTags },
    kubernetes: { mode: 'kubeconfig' },
  };
}

describe('aws.defaultTags', () => {
  it('accepts ordinary tags', () => {
    expect(parseConfig(withDefaultTags({ team: 'platform' })).aws.defaultTags).toEqual({
      team: 'platform',
    });
  });

  it.each([
    'serverless-service-controller.io/cluster',
    'Serverless-Service-Controller.io/cluster',
    'elbv2.k8s.aws/cluster',
    'kubernetes.io/cluster/other',
    'aws:owner',
  ])('refuses the reserved key %s as a configuration error naming it', (key) => {
    expect(() => parseConfig(withDefaultTags({ [key]: 'x' }))).toThrow(ConfigurationError);
    expect(() => parseConfig(withDefaultTags({ [key]: 'x' }))).toThrow(
      `aws.defaultTags: tag key "${key}" is reserved`,
    );
  });

  it('refuses more default tags than fit beside the controller’s own', () => {
    const tags = Object.fromEntries(Array.from({ length: 46 }, (_, i) => [`t${i}`, 'v']));
    expect(() => parseConfig(withDefaultTags(tags))).toThrow('46 tags, over the 45 that fit');
  });
});
