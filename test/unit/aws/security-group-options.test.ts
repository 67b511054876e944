/**
 * Frontend security groups, backend group and prefix lists in the desired model and the plan
 * (issue 20, items 6 and 7). Against moto: test/integration/nlb-security-groups.test.ts; the
 * rules moto does not check (an NLB takes at most 5 groups, the prefix list ID format) are here.
 */
import { describe, expect, it } from 'vitest';
import { parseAnnotations } from '../../../functions/nlb/model/annotations';
import {
  buildDesiredLoadBalancer,
  type ProviderSettings,
} from '../../../functions/nlb/model/desired';
import { planChanges } from '../../../functions/nlb/model/plan';
import type { DesiredLoadBalancer, Observed } from '../../../functions/nlb/model/types';
import { InvariantError, TerminalError } from '../../../functions/core/errors';
import type { Service } from '../../../functions/core/objects';
import { makeService, type ServiceOptions } from '../../../kit/core-objects';
import { observedAsBuilt } from '../../support/observed-model';
import { testProviderSettings } from '../../support/nlb-settings';

const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;
const subnets = [
  { subnetId: 'subnet-a', availabilityZone: 'us-east-1a' },
  { subnetId: 'subnet-b', availabilityZone: 'us-east-1b' },
];
const hosts = [{ name: 'n1', providerID: 'aws:///us-east-1a/i-1', instanceId: 'i-1' }];

function desiredFor(
  options: ServiceOptions,
  frontendSecurityGroupIds?: readonly string[],
  settings: ProviderSettings = testProviderSettings,
): DesiredLoadBalancer {
  const service: Service = makeService({ uid: 'uid-1', ...options });
  return buildDesiredLoadBalancer({
    service,
    hosts,
    settings,
    options: parseAnnotations(service),
    subnets,
    frontendSecurityGroupIds,
  });
}

function problemOf(build: () => unknown): string {
  try {
    build();
  } catch (error) {
    if (error instanceof TerminalError) return error.message;
    throw error;
  }
  throw new Error('expected a TerminalError');
}

/** What AWS reports for an NLB built from `desired`, carrying `groups`, with `managed` still there. */
function observed(desired: DesiredLoadBalancer, groups: string[], managed: boolean): Observed {
  return observedAsBuilt(desired, {
    securityGroupIds: groups,
    listener: () => ({ certificateArns: [] }),
    securityGroup: managed
      ? { id: 'sg-managed', name: 'k8s-managed', ingress: [], tags: desired.securityGroup.tags }
      : undefined,
  });
}

describe('aws-load-balancer-security-groups: the user frontend groups replace the managed one', () => {
  const annotated = { annotations: { [aws('security-groups')]: 'sg-0aaa, team-a-lb' } };

  it('carries the resolved groups without the backend group (ALBC: manage-backend defaults to false)', () => {
    const desired = desiredFor(annotated, ['sg-0aaa', 'sg-0bbb']);
    expect(desired.frontendSecurityGroupIds).toEqual(['sg-0aaa', 'sg-0bbb']);
    expect(desired.backendSecurityGroupId).toBeUndefined();
    // The managed group's rules are not built: the user's groups decide who gets in.
    expect(desired.securityGroup.ingress).toEqual([]);
  });

  it('adds the backend group when manage-backend-security-group-rules is true', () => {
    const desired = desiredFor(
      {
        annotations: {
          ...annotated.annotations,
          [aws('manage-backend-security-group-rules')]: 'true',
        },
      },
      ['sg-0aaa'],
    );
    expect(desired.backendSecurityGroupId).toBe('sg-backend');
  });

  it('ignores manage-backend-security-group-rules without security-groups, as ALBC does', () => {
    const desired = desiredFor({
      annotations: { [aws('manage-backend-security-group-rules')]: 'false' },
    });
    expect(desired.frontendSecurityGroupIds).toBeUndefined();
    expect(desired.backendSecurityGroupId).toBe('sg-backend');
  });

  it('refuses backend rules when the deployment has no backend group', () => {
    const { backendSecurityGroupId: _, ...noBackend } = testProviderSettings;
    const problem = problemOf(() =>
      desiredFor(
        {
          annotations: {
            ...annotated.annotations,
            [aws('manage-backend-security-group-rules')]: 'true',
          },
        },
        ['sg-0aaa'],
        noBackend,
      ),
    );
    expect(problem).toContain('manage-backend-security-group-rules');
    expect(problem).toContain('backend security group');
  });

  it('refuses more than 5 groups with the backend group (an NLB takes 5; moto does not check)', () => {
    const five = ['sg-01', 'sg-02', 'sg-03', 'sg-04', 'sg-05'];
    const options = {
      annotations: {
        [aws('security-groups')]: five.join(','),
        [aws('manage-backend-security-group-rules')]: 'true',
      },
    };
    expect(problemOf(() => desiredFor(options, five))).toContain('at most 5');
    expect(() =>
      desiredFor({ annotations: { [aws('security-groups')]: five.join(',') } }, five),
    ).not.toThrow();
  });

  it('rejects bad values of the annotations', () => {
    const bad = (annotations: Record<string, string>) =>
      problemOf(() => parseAnnotations(makeService({ annotations })));
    expect(bad({ [aws('security-groups')]: ' , ' })).toContain('at least one');
    expect(bad({ [aws('security-groups')]: 'a,b,c,d,e,f' })).toContain('at most 5');
    expect(bad({ [aws('manage-backend-security-group-rules')]: 'yes' })).toContain('"true"');
  });

  it('is an invariant failure to build the model with unresolved groups', () => {
    expect(() => desiredFor(annotated)).toThrow(InvariantError);
  });

  it('plans no managed group for a new NLB, which is created with the user groups', () => {
    const desired = desiredFor(annotated, ['sg-0aaa']);
    const steps = planChanges(desired, { listeners: [], targetGroups: [] }).steps;
    expect(steps.map((s) => s.kind)).not.toContain('createSecurityGroup');
    expect(steps.map((s) => s.kind)).not.toContain('authorizeIngress');
    expect(steps.map((s) => s.kind)).toContain('createLoadBalancer');
  });

  it('switching from the managed group: SetSecurityGroups, then the managed group is deleted last', () => {
    const desired = desiredFor(annotated, ['sg-0aaa']);
    const steps = planChanges(desired, observed(desired, ['sg-managed', 'sg-backend'], true)).steps;
    expect(steps.map((s) => s.kind)).toEqual(['setSecurityGroups', 'deleteSecurityGroup']);
    expect(steps[1]).toMatchObject({ id: 'sg-managed' });
  });

  it('plans nothing when the NLB carries exactly the user groups', () => {
    const desired = desiredFor(annotated, ['sg-0aaa', 'sg-0bbb']);
    const steps = planChanges(desired, observed(desired, ['sg-0bbb', 'sg-0aaa'], false)).steps;
    expect(steps).toEqual([]);
  });

  it('switching back creates the managed group and sets it on the NLB', () => {
    const desired = desiredFor({});
    const steps = planChanges(desired, observed(desired, ['sg-0aaa'], false)).steps;
    expect(steps.map((s) => s.kind)).toEqual([
      'createSecurityGroup',
      'authorizeIngress',
      'setSecurityGroups',
    ]);
  });
});

describe('aws-load-balancer-security-group-prefix-lists', () => {
  const lists = 'pl-0123456789abcdef0, pl-00000001';

  it('allows each prefix list on every listener port, beside the source ranges, without ICMP', () => {
    const desired = desiredFor({
      annotations: { [aws('security-group-prefix-lists')]: lists },
      spec: { loadBalancerSourceRanges: ['10.0.0.0/8'] },
    });
    const rules = desired.securityGroup.ingress.map((r) => `${r.protocol}:${r.fromPort}:${r.cidr}`);
    expect(rules.filter((r) => r.includes(':pl-')).sort()).toEqual([
      'tcp:443:pl-00000001',
      'tcp:443:pl-0123456789abcdef0',
      'tcp:80:pl-00000001',
      'tcp:80:pl-0123456789abcdef0',
    ]);
    expect(rules).toContain('tcp:80:10.0.0.0/8');
    expect(rules).toContain('icmp:3:10.0.0.0/8');
  });

  it('leaves out the 0.0.0.0/0 default when no source range is given, as ALBC does', () => {
    const desired = desiredFor({ annotations: { [aws('security-group-prefix-lists')]: lists } });
    expect(desired.securityGroup.ingress.every((r) => r.cidr.startsWith('pl-'))).toBe(true);
    expect(desired.securityGroup.ingress).toHaveLength(4);
  });

  it('is ignored with user security groups, as ALBC does', () => {
    const desired = desiredFor(
      {
        annotations: {
          [aws('security-group-prefix-lists')]: lists,
          [aws('security-groups')]: 'sg-0aaa',
        },
      },
      ['sg-0aaa'],
    );
    expect(desired.securityGroup.ingress).toEqual([]);
  });

  it('rejects what is not a prefix list ID', () => {
    const problem = problemOf(() =>
      parseAnnotations(
        makeService({ annotations: { [aws('security-group-prefix-lists')]: 'pl-1,sg-0aaa' } }),
      ),
    );
    expect(problem).toContain('"pl-1" is not a managed prefix list ID');
  });

  it('counts prefix list rules in the security group rule limit', () => {
    const ids = Array.from({ length: 40 }, (_, i) => `pl-${String(i).padStart(8, '0')}`);
    const problem = problemOf(() =>
      desiredFor({ annotations: { [aws('security-group-prefix-lists')]: ids.join(',') } }),
    );
    expect(problem).toContain('80 security group rules');
    expect(problem).toContain('40 prefix lists');
  });
});
