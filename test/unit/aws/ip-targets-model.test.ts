import { describe, expect, it } from 'vitest';
import { endpointsDigest, type EndpointSliceView } from '../../../functions/core/endpoint-targets';
import { InvariantError, TerminalError } from '../../../functions/core/errors';
import type { Service } from '../../../functions/core/objects';
import type { NlbClients } from '../../../functions/aws/clients';
import { parseAnnotations } from '../../../functions/nlb/model/annotations';
import { NlbProvider } from '../../../functions/nlb/nlb-provider';
import { buildDesiredLoadBalancer } from '../../../functions/nlb/model/desired';
import { planChanges, type Step } from '../../../functions/nlb/model/plan';
import {
  ipTargetId,
  registeredTargetId,
  targetDescription,
} from '../../../functions/nlb/model/target-ids';
import type { DesiredLoadBalancer } from '../../../functions/nlb/model/types';
import { makeService, type ServiceOptions } from '../../../kit/core-objects';
import { testProviderSettings } from '../../support/nlb-settings';
import { observedAsBuilt } from '../../support/observed-model';

const ipMode = { 'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type': 'ip' };
const subnets = [{ subnetId: 'subnet-a', availabilityZone: 'us-east-1a' }];
const hosts = [{ name: 'n1', providerID: 'aws:///us-east-1a/i-1', instanceId: 'i-1' }];

const pod = (ip: string, conditions: { ready?: boolean; terminating?: boolean } = {}) => ({
  addresses: [ip],
  conditions,
  targetRef: { kind: 'Pod' },
});

function slice(endpoints: EndpointSliceView['endpoints']): EndpointSliceView {
  return {
    addressType: 'IPv4',
    ports: [
      { name: 'http', port: 8080, protocol: 'TCP' },
      { name: 'https', port: 8443, protocol: 'TCP' },
    ],
    endpoints,
  };
}

function desiredFor(
  options: ServiceOptions,
  slices: readonly EndpointSliceView[] | undefined,
): DesiredLoadBalancer {
  const service: Service = makeService({ uid: 'uid-1', ...options });
  return buildDesiredLoadBalancer({
    service,
    hosts,
    settings: testProviderSettings,
    options: parseAnnotations(service),
    subnets,
    endpointSlices: slices,
  });
}

const ports = [
  { name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 },
  { name: 'https', protocol: 'TCP', port: 443, targetPort: 'https' },
];

describe('the model of pod target groups (nlb-target-type: ip)', () => {
  it('holds the ready pods on their slice ports, labels the group with a numeric targetPort (else 1), and checks the traffic port', () => {
    const desired = desiredFor({ annotations: ipMode, ports }, [
      slice([
        pod('10.0.1.5', { ready: true }),
        pod('10.0.1.6', { ready: false, terminating: true }),
        pod('10.0.1.7', { ready: false }),
      ]),
    ]);
    expect(desired.targetGroups.map((tg) => [tg.key, tg.targetType, tg.port, tg.targets])).toEqual([
      ['80', 'ip', 8080, ['10.0.1.5:8080']],
      ['443', 'ip', 1, ['10.0.1.5:8443']],
    ]);
    for (const tg of desired.targetGroups) {
      expect(tg.healthCheck).toMatchObject({ protocol: 'TCP', port: 'traffic-port' });
    }
  });

  it('ignores what only nodes need: NodePorts, the Local policy health port, kube-proxy for UDP', () => {
    const desired = desiredFor(
      {
        annotations: ipMode,
        ports: [{ name: 'dns', protocol: 'UDP', port: 53, targetPort: 5353 }],
        spec: {
          externalTrafficPolicy: 'Local',
          healthCheckNodePort: 32000,
          allocateLoadBalancerNodePorts: false,
        },
      },
      [
        {
          addressType: 'IPv4',
          ports: [{ name: 'dns', port: 5353, protocol: 'UDP' }],
          endpoints: [pod('10.0.1.5')],
        },
      ],
    );
    expect(desired.targetGroups).toMatchObject([
      {
        targetType: 'ip',
        port: 5353,
        targets: ['10.0.1.5:5353'],
        healthCheck: { protocol: 'TCP', port: 'traffic-port' },
      },
    ]);
  });

  it('names pod groups apart from node groups, and keeps the name when only the targetPort changes', () => {
    const slices = [slice([pod('10.0.1.5')])];
    const nodes = desiredFor(
      { ports: ports.map((p, i) => ({ ...p, nodePort: 30080 + i })) },
      undefined,
    );
    const pods = desiredFor({ annotations: ipMode, ports }, slices);
    const moved = desiredFor(
      { annotations: ipMode, ports: [{ ...ports[0]!, targetPort: 9090 }, ports[1]!] },
      slices,
    );
    expect(pods.targetGroups.map((tg) => tg.name)).not.toEqual(
      nodes.targetGroups.map((tg) => tg.name),
    );
    expect(moved.targetGroups.map((tg) => tg.name)).toEqual(pods.targetGroups.map((tg) => tg.name));
    expect(nodes.targetGroups.every((tg) => tg.targetType === 'instance')).toBe(true);
  });

  it('refuses more ready pods than a target group holds, and a Service that reaches it without its slices', () => {
    const many = Array.from({ length: 1001 }, (_, i) =>
      pod(`10.0.${Math.floor(i / 250)}.${i % 250}`),
    );
    expect(() => desiredFor({ annotations: ipMode, ports }, [slice(many)])).toThrow(
      /port 80 has 1001 ready endpoints, more than the 1000 targets a target group can hold/,
    );
    expect(() => desiredFor({ annotations: ipMode, ports }, undefined)).toThrow(InvariantError);
  });

  it('tells a Service with pod targets by its two annotations alone, whatever else is wrong with it', () => {
    // No AWS call is made: the clients are never used.
    const provider = new NlbProvider({} as NlbClients, testProviderSettings);
    const broken = { 'service.beta.kubernetes.io/aws-load-balancer-scheme': 'sideways' };
    expect(
      provider.targetsFromEndpoints(makeService({ annotations: { ...ipMode, ...broken } })),
    ).toBe(true);
    expect(
      provider.targetsFromEndpoints(
        makeService({
          annotations: { 'service.beta.kubernetes.io/aws-load-balancer-type': 'nlb-ip' },
        }),
      ),
    ).toBe(true);
    expect(provider.targetsFromEndpoints(makeService({ annotations: broken }))).toBe(false);
  });

  it('reads type nlb-ip as ip targets, and refuses it beside nlb-target-type instance', () => {
    const legacy = makeService({
      annotations: { 'service.beta.kubernetes.io/aws-load-balancer-type': 'nlb-ip' },
    });
    expect(parseAnnotations(legacy).targetType).toBe('ip');
    const both = makeService({
      annotations: {
        'service.beta.kubernetes.io/aws-load-balancer-type': 'nlb-ip',
        'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type': 'instance',
      },
    });
    expect(() => parseAnnotations(both)).toThrow(TerminalError);
    expect(() => parseAnnotations(both)).toThrow(/keep one/);
  });
});

describe('the plan for pod target groups', () => {
  const kinds = (steps: readonly Step[]) =>
    steps
      .filter((s) => s.kind === 'registerTargets' || s.kind === 'deregisterTargets')
      .map((s) => `${s.kind} ${'targets' in s ? s.targets.join(',') : ''}`);
  const observedWith = (desired: DesiredLoadBalancer, registered: string[]) => {
    const observed = observedAsBuilt(desired, {
      securityGroupIds: ['sg-frontend', 'sg-backend'],
      listener: (l) => ({ certificateArns: l.certificateArns, sslPolicy: l.sslPolicy }),
    });
    return {
      ...observed,
      targetGroups: observed.targetGroups.map((tg) => ({ ...tg, targets: registered })),
    };
  };
  const httpOnly = [ports[0]!];

  it('deregisters pods that stopped serving before it registers new ones', () => {
    const desired = desiredFor({ annotations: ipMode, ports: httpOnly }, [
      slice([
        pod('10.0.1.5', { ready: false, terminating: true }),
        pod('10.0.1.6'),
        pod('10.0.1.9'),
      ]),
    ]);
    const plan = planChanges(desired, observedWith(desired, ['10.0.1.5:8080', '10.0.1.6:8080']));
    expect(kinds(plan.steps)).toEqual([
      'deregisterTargets 10.0.1.5:8080',
      'registerTargets 10.0.1.9:8080',
    ]);
  });

  it('registers first where deregistering first would leave the group empty', () => {
    const desired = desiredFor({ annotations: ipMode, ports: httpOnly }, [
      slice([pod('10.0.1.9')]),
    ]);
    const plan = planChanges(desired, observedWith(desired, ['10.0.1.5:8080']));
    expect(kinds(plan.steps)).toEqual([
      'registerTargets 10.0.1.9:8080',
      'deregisterTargets 10.0.1.5:8080',
    ]);
  });
});

describe('pod target ids', () => {
  it('name a pod by ip:port and give ELBv2 its Id and Port back, IPv6 included', () => {
    expect(ipTargetId({ ip: '10.0.1.5', port: 8080 })).toBe('10.0.1.5:8080');
    expect(targetDescription('10.0.1.5:8080')).toEqual({ Id: '10.0.1.5', Port: 8080 });
    expect(targetDescription('fd00::1:8080')).toEqual({ Id: 'fd00::1', Port: 8080 });
    expect(targetDescription('i-0123456789abcdef0')).toEqual({ Id: 'i-0123456789abcdef0' });
    expect(registeredTargetId({ Id: '10.0.1.5', Port: 8080 }, 'ip')).toBe('10.0.1.5:8080');
    expect(registeredTargetId({ Id: 'i-1', Port: 30080 }, 'instance')).toBe('i-1');
  });
});

describe('the digest of a Service’s slices', () => {
  const a = slice([pod('10.0.1.5'), pod('10.0.1.6')]);
  it('ignores slice order, endpoint order and fields the targets do not depend on', () => {
    const reordered: EndpointSliceView = {
      ...a,
      endpoints: [...a.endpoints].reverse().map((e) => ({ ...e, zone: 'us-east-1b' })),
    };
    const other = slice([pod('10.0.2.5')]);
    expect(endpointsDigest([a, other])).toBe(endpointsDigest([other, reordered]));
  });

  it('changes when a pod stops serving, starts terminating, or its port changes', () => {
    const base = endpointsDigest([a]);
    expect(endpointsDigest([slice([pod('10.0.1.5'), pod('10.0.1.6', { ready: false })])])).not.toBe(
      base,
    );
    const terminating = endpointsDigest([
      slice([pod('10.0.1.5'), pod('10.0.1.6', { ready: false, terminating: true })]),
    ]);
    expect(terminating).not.toBe(base);
    expect(
      endpointsDigest([{ ...a, ports: [{ name: 'http', port: 9090, protocol: 'TCP' }] }]),
    ).not.toBe(base);
  });
});
