import { describe, expect, it } from 'vitest';
import { parseAnnotations } from '../../../functions/nlb/model/annotations';
import {
  buildDesiredLoadBalancer,
  type ProviderSettings,
} from '../../../functions/nlb/model/desired';
import { planChanges, type Step } from '../../../functions/nlb/model/plan';
import type { DesiredLoadBalancer, Observed } from '../../../functions/nlb/model/types';
import { TerminalError } from '../../../functions/core/errors';
import type { Service } from '../../../functions/core/objects';
import { testProviderSettings } from '../../support/nlb-settings';
import { makeService, type ServiceOptions } from '../../../kit/core-objects';
import { observedAsBuilt } from '../../support/observed-model';

const settings: ProviderSettings = testProviderSettings;
const subnets = [
  { subnetId: 'subnet-a', availabilityZone: 'us-east-1a' },
  { subnetId: 'subnet-b', availabilityZone: 'us-east-1b' },
];
const hosts = ['i-0000000000000000a', 'i-0000000000000000b'].map((id) => ({
  name: id,
  providerID: `aws:///us-east-1a/${id}`,
  instanceId: id,
}));

function desiredFor(options: ServiceOptions = {}, hostList = hosts): DesiredLoadBalancer {
  const service: Service = makeService({ uid: 'uid-1', ...options });
  return buildDesiredLoadBalancer({
    service,
    hosts: hostList,
    settings,
    options: parseAnnotations(service),
    subnets,
  });
}

/** What AWS would report after applying `desired` exactly. */
function observedFrom(desired: DesiredLoadBalancer): Observed {
  return observedAsBuilt(desired, {
    targetGroupArn: ({ name }) => `arn:tg/${name}`,
    pinnedAddresses: desired.subnetMappings.filter((m) => m.allocationId || m.privateIPv4Address),
    securityGroupIds: ['sg-frontend', 'sg-backend'],
    listener: (l) => ({ certificateArns: l.certificateArns, sslPolicy: l.sslPolicy }),
  });
}

const kinds = (steps: readonly Step[]) => steps.map((s) => s.kind);

describe('planChanges', () => {
  it('creates from nothing in dependency order: group, rules, target groups (verified, filled), NLB, listeners', () => {
    const plan = planChanges(desiredFor(), { listeners: [], targetGroups: [] });
    expect(kinds(plan.steps)).toEqual([
      'createSecurityGroup',
      'authorizeIngress',
      'createTargetGroup',
      'createTargetGroup',
      'verifyCreatedTargetGroups',
      'registerTargets',
      'registerTargets',
      'createLoadBalancer',
      'createListener',
      'createListener',
    ]);
  });

  it('plans nothing when AWS already matches', () => {
    const desired = desiredFor();
    expect(planChanges(desired, observedFrom(desired)).steps).toEqual([]);
  });

  it('replaces a target group make-before-break when its nodePort changes', () => {
    const before = desiredFor();
    const after = desiredFor({
      ports: [
        { name: 'http', protocol: 'TCP', port: 80, nodePort: 31080 },
        { name: 'https', protocol: 'TCP', port: 443, nodePort: 30443 },
      ],
    });
    const steps = planChanges(after, observedFrom(before)).steps;
    expect(kinds(steps)).toEqual([
      'createTargetGroup',
      'verifyCreatedTargetGroups',
      'registerTargets',
      'modifyListener',
      'deleteTargetGroup',
    ]);
    const old = before.targetGroups.find((tg) => tg.key === '80')?.name;
    expect(steps.at(-1)).toMatchObject({ kind: 'deleteTargetGroup', name: old });
  });

  it('moves a listener to TLS with ModifyListener (an AWS rule moto rejects for TLS, covered here)', () => {
    const before = desiredFor();
    const cert = 'arn:aws:acm:us-east-1:123456789012:certificate/abc';
    const after = desiredFor({
      annotations: {
        'service.beta.kubernetes.io/aws-load-balancer-ssl-cert': cert,
        'service.beta.kubernetes.io/aws-load-balancer-ssl-ports': '443',
      },
    });
    const steps = planChanges(after, observedFrom(before)).steps;
    expect(steps).toEqual([
      {
        kind: 'modifyListener',
        arn: 'arn:listener/443',
        listener: {
          port: 443,
          protocol: 'TLS',
          targetGroupKey: '443',
          certificateArns: [cert],
          sslPolicy: 'ELBSecurityPolicy-TLS13-1-2-2021-06',
        },
      },
    ]);
  });

  describe('TLS listener certificates: the default with the listener, the others one by one', () => {
    const certs = ['a', 'b', 'c'].map(
      (id) => `arn:aws:acm:us-east-1:123456789012:certificate/${id}`,
    );
    const [a, b, c] = certs as [string, string, string];
    const tls = (list: readonly string[]) =>
      desiredFor({
        annotations: {
          'service.beta.kubernetes.io/aws-load-balancer-ssl-cert': list.join(','),
          'service.beta.kubernetes.io/aws-load-balancer-ssl-ports': '443',
        },
      });

    it('plans nothing when the listener holds the same certificates (a resync with two makes no call)', () => {
      expect(planChanges(tls([a, b]), observedFrom(tls([a, b]))).steps).toEqual([]);
      // The same set, listed in another order after the default.
      expect(planChanges(tls([a, c, b]), observedFrom(tls([a, b, c]))).steps).toEqual([]);
    });

    it('removes a certificate taken out of the annotation, and changes nothing else', () => {
      expect(planChanges(tls([a]), observedFrom(tls([a, b]))).steps).toEqual([
        {
          kind: 'removeListenerCertificates',
          arn: 'arn:listener/443',
          port: 443,
          certificateArns: [b],
        },
      ]);
    });

    it('adds a certificate put into the annotation, without modifying the listener', () => {
      expect(planChanges(tls([a, b, c]), observedFrom(tls([a, b]))).steps).toEqual([
        {
          kind: 'addListenerCertificates',
          arn: 'arn:listener/443',
          port: 443,
          certificateArns: [c],
        },
      ]);
    });

    it('a new default modifies the listener; the old default stays only if still listed', () => {
      const steps = planChanges(tls([b, a]), observedFrom(tls([a, b]))).steps;
      expect(kinds(steps)).toEqual(['modifyListener', 'addListenerCertificates']);
      expect(steps[1]).toMatchObject({ certificateArns: [a] });
      const dropped = planChanges(tls([c]), observedFrom(tls([a, b]))).steps;
      expect(kinds(dropped)).toEqual(['modifyListener', 'removeListenerCertificates']);
      expect(dropped[1]).toMatchObject({ certificateArns: [b] });
    });
  });

  it('deletes a removed port’s listener before its target group, and revokes its rules last', () => {
    const before = desiredFor();
    const after = desiredFor({
      ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }],
    });
    const steps = planChanges(after, observedFrom(before)).steps;
    expect(kinds(steps)).toEqual(['deleteListener', 'deleteTargetGroup', 'revokeIngress']);
    expect(steps[2]).toMatchObject({
      rules: [{ protocol: 'tcp', fromPort: 443, toPort: 443, cidr: '0.0.0.0/0' }],
    });
  });

  it('opens new source ranges first and closes old ones last', () => {
    const before = desiredFor();
    const after = desiredFor({ spec: { loadBalancerSourceRanges: ['10.0.0.0/8'] } });
    const steps = planChanges(after, observedFrom(before)).steps;
    expect(kinds(steps)).toEqual(['authorizeIngress', 'revokeIngress']);
  });

  it('registers new targets before deregistering gone ones', () => {
    const before = desiredFor();
    const after = desiredFor({}, [
      hosts[0]!,
      { name: 'c', providerID: 'aws:///z/i-0000000000000000c', instanceId: 'i-0000000000000000c' },
    ]);
    const steps = planChanges(after, observedFrom(before)).steps;
    expect(kinds(steps)).toEqual([
      'registerTargets',
      'registerTargets',
      'deregisterTargets',
      'deregisterTargets',
    ]);
    expect(steps[0]).toMatchObject({ targets: ['i-0000000000000000c'] });
    expect(steps[2]).toMatchObject({ targets: ['i-0000000000000000b'] });
  });

  it('replaces the NLB when the scheme changes, deleting the old one first and keeping the target groups', () => {
    const before = desiredFor();
    const after = desiredFor({
      annotations: { 'service.beta.kubernetes.io/aws-load-balancer-scheme': 'internet-facing' },
    });
    const plan = planChanges(after, observedFrom(before));
    expect(kinds(plan.steps)).toEqual([
      'deleteLoadBalancer',
      'createLoadBalancer',
      'createListener',
      'createListener',
    ]);
    expect(Object.keys(plan.keptTargetGroups).sort()).toEqual(['443', '80']);
  });

  it('modifies health checks and managed attributes in place', () => {
    const before = desiredFor();
    const after = desiredFor({
      annotations: {
        'service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval': '30',
        'service.beta.kubernetes.io/aws-load-balancer-proxy-protocol': '*',
        'service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled': 'true',
      },
    });
    const observed = observedFrom(before);
    const steps = planChanges(after, observed).steps;
    expect(kinds(steps).sort()).toEqual([
      'modifyLoadBalancerAttributes',
      'modifyTargetGroup',
      'modifyTargetGroup',
      'modifyTargetGroupAttributes',
      'modifyTargetGroupAttributes',
    ]);
  });

  it('changes subnets and security groups of an existing NLB in place', () => {
    const desired = desiredFor();
    const observed = observedFrom(desired);
    const moved: Observed = {
      ...observed,
      loadBalancer: {
        ...observed.loadBalancer!,
        subnetIds: ['subnet-a'],
        securityGroupIds: ['sg-frontend'],
      },
    };
    expect(kinds(planChanges(desired, moved).steps)).toEqual(['setSubnets', 'setSecurityGroups']);
  });

  it('refuses to change pinned addresses of an existing NLB, saying why (AWS fixes them at creation)', () => {
    const pin = (ips: string) =>
      desiredFor({
        annotations: { 'service.beta.kubernetes.io/aws-load-balancer-private-ipv4-addresses': ips },
      });
    const observed = observedFrom(pin('10.0.1.10,10.0.2.10'));
    expect(planChanges(pin('10.0.1.10,10.0.2.10'), observed).steps).toEqual([]);
    expect(() => planChanges(pin('10.0.1.11,10.0.2.10'), observed)).toThrow(TerminalError);
    expect(() => planChanges(pin('10.0.1.11,10.0.2.10'), observed)).toThrow(
      /apply only when the load balancer is created/,
    );
  });

  it('adds changed tags and removes only tags it applied before, never other people’s', () => {
    const before = desiredFor({
      annotations: {
        'service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags': 'team=a,cost=1',
      },
    });
    const after = desiredFor({
      annotations: {
        'service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags': 'team=b',
      },
    });
    const observed = observedFrom(before);
    const withForeign: Observed = {
      ...observed,
      loadBalancer: {
        ...observed.loadBalancer!,
        tags: { ...observed.loadBalancer!.tags, 'added-by-hand': 'x' },
      },
    };
    const steps = planChanges(after, withForeign, Object.keys(before.tags)).steps;
    const lbTags = steps.find(
      (s) => s.kind === 'tagResource' && s.resource.type === 'load-balancer',
    );
    expect(lbTags).toEqual({
      kind: 'tagResource',
      resource: { type: 'load-balancer' },
      add: { team: 'b' },
      remove: ['cost'],
    });
  });
});
