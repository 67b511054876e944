/**
 * Issue 32, finding 5: which resolved security groups a tenant may attach. Other owners' groups
 * (EKS, the AWS Load Balancer Controller, a Kubernetes cluster, this controller) are refused
 * always; the tenant policy matches the resolved group (ID, Name tag, other tags), never the
 * annotation's text.
 */
import { describe, expect, it } from 'vitest';
import { parseAnnotations } from '../../../functions/nlb/model/annotations';
import {
  foreignOwnership,
  securityGroupViolations,
  type ResolvedSecurityGroup,
  type SecurityGroupRestriction,
} from '../../../functions/nlb/model/security-group-admission';
import { TenantPolicyEnforcer } from '../../../functions/nlb/tenant-policy-check';
import { defaultClaimPolicy } from '../../../functions/core/claim';
import { makeService } from '../../../kit/core-objects';

const group = (
  value: string,
  id: string,
  tags: Record<string, string> = {},
): ResolvedSecurityGroup => ({ value, id, tags: new Map(Object.entries(tags)) });

describe('foreignOwnership: tags that say a group is someone else’s', () => {
  it.each<[string, Record<string, string>, string]>([
    [
      'the EKS cluster security group',
      {
        Name: 'eks-cluster-sg-prod-123456',
        'kubernetes.io/cluster/prod': 'owned',
        'aws:eks:cluster-name': 'prod',
      },
      'is owned by EKS (the cluster security group or a managed node group’s) (tag "aws:eks:cluster-name=prod")',
    ],
    [
      'a managed node group’s remote-access group',
      { 'eks:cluster-name': 'prod', 'eks:nodegroup-name': 'ng-1' },
      'is owned by EKS',
    ],
    [
      'the AWS Load Balancer Controller’s backend group',
      { 'elbv2.k8s.aws/cluster': 'prod', 'elbv2.k8s.aws/resource': 'backend-sg' },
      'is owned by the AWS Load Balancer Controller (tag "elbv2.k8s.aws/cluster=prod")',
    ],
    [
      'an Ingress group of the AWS Load Balancer Controller',
      {
        'ingress.k8s.aws/stack': 'team-a/web',
        'ingress.k8s.aws/resource': 'ManagedLBSecurityGroup',
      },
      'is owned by the AWS Load Balancer Controller (tag "ingress.k8s.aws/stack=team-a/web")',
    ],
    [
      'a Service group of the AWS Load Balancer Controller',
      { 'service.k8s.aws/stack': 'team-a/web' },
      'is owned by the AWS Load Balancer Controller',
    ],
    [
      'a legacy cloud provider load balancer group',
      { 'kubernetes.io/cluster/prod': 'owned', 'kubernetes.io/service-name': 'team-a/web' },
      'is owned by a Kubernetes cluster (EKS, the legacy cloud provider or the cluster’s installer) (tag "kubernetes.io/cluster/prod=owned")',
    ],
    [
      'the legacy KubernetesCluster tag',
      { KubernetesCluster: 'prod' },
      'the legacy cloud provider’s tag',
    ],
    [
      'a Cluster API group',
      { 'sigs.k8s.io/cluster-api-provider-aws/cluster/prod': 'owned' },
      'is owned by Cluster API Provider AWS',
    ],
    [
      'another Service’s managed group of this controller',
      {
        'serverless-service-controller.io/cluster': 'prod',
        'serverless-service-controller.io/service-uid': 'uid-other',
      },
      'is one this controller manages for a Service (tag "serverless-service-controller.io/service-uid=uid-other")',
    ],
    [
      'another cluster’s group of this controller',
      { 'serverless-service-controller.io/cluster': 'staging' },
      'carries this controller’s ownership tags',
    ],
    [
      'an ownership key in another case (IAM compares keys without case)',
      { 'ELBv2.K8s.AWS/Cluster': 'prod' },
      'the AWS Load Balancer Controller',
    ],
  ])('refuses %s', (_, tags, says) => {
    expect(foreignOwnership(new Map(Object.entries(tags)))).toContain(says);
  });

  it.each<[string, Record<string, string>]>([
    ['an untagged group', {}],
    ['a group with a Name and team tags', { Name: 'team-a-lb', team: 'a' }],
    ['a group lent to the cluster (shared)', { 'kubernetes.io/cluster/prod': 'shared' }],
    ['a group made by CloudFormation', { 'aws:cloudformation:stack-name': 'team-a' }],
  ])('accepts %s', (_, tags) => {
    expect(foreignOwnership(new Map(Object.entries(tags)))).toBeUndefined();
  });

  it('quotes a long tag instead of echoing it whole', () => {
    const says = foreignOwnership(new Map([['kubernetes.io/cluster/' + 'x'.repeat(500), 'owned']]));
    expect(says?.length).toBeLessThan(300);
    expect(says).toContain('characters)');
  });
});

describe('securityGroupViolations: the tenant policy on the resolved groups', () => {
  const mine = group('team-a-lb', 'sg-0aaa1111', { Name: 'team-a-lb' });
  const byIdNamedMine = group('sg-0bbb2222', 'sg-0bbb2222', { Name: 'team-a-db' });
  const platformTagged = group('sg-0ccc3333', 'sg-0ccc3333', { 'example.com/lb-tenant': 'a' });
  // A Name tag that looks like an allowed ID, on a group whose ID is something else.
  const collision = group('sg-0aaa-team-b-db', 'sg-0ddd4444', { Name: 'sg-0aaa-team-b-db' });
  const unnamed = group('sg-0eee5555', 'sg-0eee5555');

  it.each<[string, SecurityGroupRestriction, ResolvedSecurityGroup[], string[]]>([
    ['no restriction', {}, [collision, unnamed], []],
    ['an ID pattern matches the resolved ID', { securityGroups: ['sg-0aaa*'] }, [mine], []],
    [
      'an ID pattern is not met by a Name tag that looks like it (the annotation text)',
      { securityGroups: ['sg-0aaa*'] },
      [collision],
      ['security group "sg-0aaa-team-b-db" (sg-0ddd4444) is not allowed (securityGroups)'],
    ],
    [
      'a Name pattern matches the resolved group’s Name tag, named by ID or by name',
      { securityGroups: ['team-a-*'] },
      [mine, byIdNamedMine],
      [],
    ],
    [
      'a Name pattern does not match a group without a Name tag, nor its ID',
      { securityGroups: ['sg-0eee*x', '*'] },
      [unnamed],
      ['security group "sg-0eee5555" (sg-0eee5555) is not allowed (securityGroups)'],
    ],
    [
      'a tag admits a group the platform team tagged',
      { securityGroupTags: ['example.com/lb-tenant=a'] },
      [platformTagged],
      [],
    ],
    [
      'a tag value pattern',
      { securityGroupTags: ['example.com/lb-tenant=*'] },
      [platformTagged, mine],
      ['security group "team-a-lb" (sg-0aaa1111) is not allowed (securityGroupTags)'],
    ],
    [
      'a tag of another value, or a key in another case, admits nothing',
      { securityGroupTags: ['example.com/lb-tenant=b', 'Example.com/lb-tenant=a'] },
      [platformTagged],
      ['security group "sg-0ccc3333" (sg-0ccc3333) is not allowed (securityGroupTags)'],
    ],
    [
      'either key admits',
      { securityGroups: ['team-a-*'], securityGroupTags: ['example.com/lb-tenant=a'] },
      [mine, platformTagged, collision],
      [
        'security group "sg-0aaa-team-b-db" (sg-0ddd4444) is not allowed (securityGroups, securityGroupTags)',
      ],
    ],
    [
      'none allowed',
      { securityGroups: [] },
      [mine],
      ['security group "team-a-lb" (sg-0aaa1111) is not allowed (securityGroups)'],
    ],
  ])('%s', (_, rule, groups, expected) => {
    expect(securityGroupViolations(rule, groups)).toEqual(expected);
  });
});

describe('the tenant policy hands the security-group restriction to where groups are resolved', () => {
  const namespaces = {
    namespaceLabels: () => Promise.resolve({}),
    listServices: () => Promise.resolve([]),
  };
  const svc = makeService({
    namespace: 'team-a',
    annotations: {
      'service.beta.kubernetes.io/aws-load-balancer-security-groups': 'sg-0aaa-team-b-db',
    },
  });
  const check = (policy: ConstructorParameters<typeof TenantPolicyEnforcer>[0]) =>
    new TenantPolicyEnforcer(policy, defaultClaimPolicy, namespaces).check(
      svc,
      parseAnnotations(svc),
      'internal',
      false,
    );

  it('does not decide from the annotation text, and passes the rule on', async () => {
    const decision = await check({
      rules: [{ name: 'tenants', namespaces: ['team-*'], securityGroups: ['sg-0aaa*'] }],
    });
    expect(decision.securityGroups).toEqual({
      prefix: 'tenant policy (namespace team-a, rule "tenants")',
      securityGroups: ['sg-0aaa*'],
      securityGroupTags: undefined,
    });
  });

  it('passes nothing on when the rule does not restrict security groups', async () => {
    const decision = await check({ rules: [{ namespaces: ['team-*'] }] });
    expect(decision.securityGroups).toBeUndefined();
  });
});
