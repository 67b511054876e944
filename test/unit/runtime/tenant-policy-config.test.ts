import { describe, expect, it } from 'vitest';
import { ConfigurationError, parseConfig } from '../../../functions/contract/controller-config';
import { createRuntime } from '../../../functions/wiring/wiring';
import { tenantPolicyWarnings } from '../../../functions/contract/tenant-policy-config';
import { RecordingLog, RecordingMetrics } from '../../support/runtime-world';

const base = {
  clusterName: 'prod-eu',
  region: 'eu-west-1',
  queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/work',
  tableName: 'controller-state',
  aws: { vpcId: 'vpc-0a1b2c3d' },
  kubernetes: { mode: 'kubeconfig' },
};

function problems(tenantPolicy: unknown): string[] {
  try {
    parseConfig({ ...base, tenantPolicy });
  } catch (error) {
    if (!(error instanceof ConfigurationError)) throw error;
    return error.message.split('\n').slice(1);
  }
  return [];
}

describe('the tenantPolicy setting', () => {
  it('accepts a policy with name and label rules and a default, and leaves it out when absent', () => {
    const config = parseConfig({
      ...base,
      tenantPolicy: {
        rules: [
          {
            name: 'shop',
            namespaces: ['shop', 'team-*'],
            internetFacing: true,
            certificateArns: ['arn:aws:acm:*:123456789012:certificate/*'],
            eipAllocations: ['eipalloc-0123456789abcdef0'],
            maxLoadBalancerServices: 5,
            maxListeners: 4,
            requireSubnetRoleTag: false,
          },
          {
            namespaceSelector: {
              matchLabels: { 'example.com/tier': 'gold' },
              matchExpressions: [{ key: 'env', operator: 'In', values: ['prod'] }],
            },
          },
        ],
        default: { internetFacing: false, maxLoadBalancerServices: 2 },
      },
    });
    expect(config.tenantPolicy?.rules).toHaveLength(2);
    expect(config.tenantPolicy?.default).toEqual({
      internetFacing: false,
      maxLoadBalancerServices: 2,
    });
    expect(parseConfig(base).tenantPolicy).toBeUndefined();
  });

  it.each<[string, unknown, RegExp]>([
    [
      'an unknown key in a rule',
      { rules: [{ namespaces: ['a'], internetFacng: false }] },
      /tenantPolicy\.rules\.0: Unrecognized key: "internetFacng"/,
    ],
    ['an unknown key at the top', { rule: [] }, /tenantPolicy: Unrecognized key: "rule"/],
    [
      'a certificate pattern that is not an ARN',
      { default: { certificateArns: ['*'] } },
      /tenantPolicy\.default\.certificateArns\.0: .*certificate ARN pattern/,
    ],
    [
      'a certificate pattern with a field too many',
      { default: { certificateArns: ['arn:aws:acm:*:123456789012:certificate:*:x'] } },
      /certificateArns\.0: .*certificate ARN pattern/,
    ],
    [
      'a bad namespace glob',
      { rules: [{ namespaces: ['Team_A'] }] },
      /tenantPolicy\.rules\.0\.namespaces\.0: .*namespace name/,
    ],
    [
      'a rule without selectors',
      { rules: [{ internetFacing: false }] },
      /tenantPolicy\.rules\.0: a rule needs namespaces or namespaceSelector/,
    ],
    [
      'selectors on the default rule',
      { default: { namespaces: ['a'] } },
      /tenantPolicy\.default: Unrecognized key: "namespaces"/,
    ],
    [
      'an empty selector',
      { rules: [{ namespaceSelector: {} }] },
      /namespaceSelector: give matchLabels or matchExpressions/,
    ],
    [
      'In without values',
      { rules: [{ namespaceSelector: { matchExpressions: [{ key: 'env', operator: 'In' }] } }] },
      /matchExpressions\.0: In and NotIn need values/,
    ],
    [
      'a bad Elastic IP pattern',
      { default: { eipAllocations: ['10.0.0.1'] } },
      /eipAllocations\.0: .*Elastic IP allocation ID/,
    ],
    [
      'more listeners than an NLB has',
      { default: { maxListeners: 51 } },
      /tenantPolicy\.default\.maxListeners: /,
    ],
    [
      'a security group pattern starting with sg- that is no ID pattern',
      { default: { securityGroups: ['sg-team-*'] } },
      /securityGroups\.0: .*security group ID pattern .* not starting with sg-/,
    ],
    [
      'a security group tag without "="',
      { default: { securityGroupTags: ['team'] } },
      /securityGroupTags\.0: .*key=value/,
    ],
    [
      'a bad prefix list pattern',
      { default: { securityGroupPrefixLists: ['sg-0123'] } },
      /securityGroupPrefixLists\.0: .*managed prefix list ID/,
    ],
    [
      'a bucket pattern with characters S3 does not allow',
      { default: { accessLogBuckets: ['Logs_{namespace}'] } },
      /accessLogBuckets\.0: .*S3 bucket name pattern/,
    ],
    [
      'a prefix pattern with a comma',
      { default: { accessLogPrefixes: ['a,b'] } },
      /accessLogPrefixes\.0: .*access log prefix pattern/,
    ],
    [
      'a name pattern with characters a load balancer name cannot have',
      { default: { loadBalancerNames: ['{namespace}_*'] } },
      /loadBalancerNames\.0: .*load balancer name pattern/,
    ],
    [
      'more secondary IPs than AWS allows',
      { default: { maxSecondaryIpsPerSubnet: 8 } },
      /tenantPolicy\.default\.maxSecondaryIpsPerSubnet: /,
    ],
  ])('names %s', (_, policy, expected) => {
    const found = problems(policy);
    expect(found.join('\n')).toMatch(expected);
  });
});

describe('a policy that fails open', () => {
  const rulesOnly = { rules: [{ namespaces: ['team-*'], internetFacing: false }] };

  it('is accepted, and the new restrictions with it', () => {
    const config = parseConfig({
      ...base,
      tenantPolicy: {
        rules: [
          {
            namespaces: ['team-*'],
            securityGroupPrefixLists: ['pl-0aaa*'],
            accessLogBuckets: ['logs-{namespace}'],
            accessLogPrefixes: ['{namespace}/*', ''],
            loadBalancerNames: ['{namespace}-*'],
            maxSecondaryIpsPerSubnet: 1,
          },
        ],
        default: { maxLoadBalancerServices: 0 },
      },
    });
    expect(config.tenantPolicy?.rules[0]?.loadBalancerNames).toEqual(['{namespace}-*']);
  });

  it('accepts security group ID and Name patterns and tags (issue 32, finding 5)', () => {
    const config = parseConfig({
      ...base,
      tenantPolicy: {
        rules: [
          {
            namespaces: ['team-*'],
            securityGroups: ['sg-0aaa*', 'sg-*', 'team-a-*', 'shared lb'],
            securityGroupTags: ['example.com/lb-tenant=team-a', 'team=*', 'empty='],
          },
        ],
        default: {},
      },
    });
    expect(config.tenantPolicy?.rules[0]?.securityGroupTags).toHaveLength(3);
  });

  it('is warned about when rules exist without a default, and only then', () => {
    const [warning, ...more] = tenantPolicyWarnings(
      parseConfig({ ...base, tenantPolicy: rulesOnly }).tenantPolicy,
    );
    expect(more).toEqual([]);
    expect(warning).toMatch(
      /tenantPolicy has rules but no `default`: every namespace that matches no rule .* has no restrictions at all/,
    );
    expect(warning).toContain('"default": { "maxLoadBalancerServices": 0 }');
    expect(tenantPolicyWarnings(undefined)).toEqual([]);
    expect(tenantPolicyWarnings({ rules: [] })).toEqual([]);
    expect(tenantPolicyWarnings({ ...rulesOnly, default: { maxLoadBalancerServices: 0 } })).toEqual(
      [],
    );
  });

  it('is warned about in the log when the functions read their configuration', () => {
    const log = new RecordingLog();
    const options = { log, metrics: new RecordingMetrics() };
    createRuntime(parseConfig({ ...base, tenantPolicy: rulesOnly }), options);
    expect(log.lines.filter((l) => l.level === 'warn').map((l) => l.message)).toEqual(
      tenantPolicyWarnings(rulesOnly),
    );
    const quiet = new RecordingLog();
    createRuntime(parseConfig({ ...base, tenantPolicy: { ...rulesOnly, default: {} } }), {
      ...options,
      log: quiet,
    });
    expect(quiet.lines).toEqual([]);
  });
});
