import { describe, expect, it } from 'vitest';
import { parseAnnotations } from '../../../functions/nlb/model/annotations';
import { buildDesiredLoadBalancer } from '../../../functions/nlb/model/desired';
import { TerminalError } from '../../../functions/core/errors';
import { makeService, type ServiceOptions } from '../../../kit/core-objects';
import { testProviderSettings } from '../../support/nlb-settings';

const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;

function proxyProtocolByPort(options: ServiceOptions): Record<string, string | undefined> {
  const service = makeService(options);
  const desired = buildDesiredLoadBalancer({
    service,
    hosts: [],
    settings: testProviderSettings,
    options: parseAnnotations(service),
    subnets: [{ subnetId: 'subnet-a', availabilityZone: 'us-east-1a' }],
  });
  return Object.fromEntries(
    desired.targetGroups.map((tg) => [tg.key, tg.attributes['proxy_protocol_v2.enabled']]),
  );
}

describe('annotation aws-load-balancer-proxy-protocol-per-target-group', () => {
  const perTargetGroup = aws('proxy-protocol-per-target-group');

  it('enables the listed Service ports and disables the rest, spaces allowed', () => {
    expect(proxyProtocolByPort({ annotations: { [perTargetGroup]: ' 80 , 8080' } })).toEqual({
      '80': 'true',
      '443': 'false',
    });
  });

  it('wins over the target-group-attributes annotation, as in aws-load-balancer-controller', () => {
    expect(
      proxyProtocolByPort({
        annotations: {
          [perTargetGroup]: '80',
          [aws('target-group-attributes')]: 'proxy_protocol_v2.enabled=true',
        },
      }),
    ).toEqual({ '80': 'true', '443': 'false' });
  });

  it('gives way to proxy-protocol "*"', () => {
    expect(
      proxyProtocolByPort({
        annotations: { [perTargetGroup]: '80', [aws('proxy-protocol')]: '*' },
      }),
    ).toEqual({ '80': 'true', '443': 'true' });
  });

  it('leaves the attribute alone without the annotation', () => {
    expect(proxyProtocolByPort({})).toEqual({ '80': undefined, '443': undefined });
  });

  it.each([['http'], ['80,x'], ['0'], ['65536'], ['']])(
    'refuses %j with a terminal error naming the annotation',
    (value) => {
      const parse = () =>
        parseAnnotations(makeService({ annotations: { [perTargetGroup]: value } }));
      expect(parse).toThrow(TerminalError);
      expect(parse).toThrow(new RegExp(`${perTargetGroup}: invalid value`));
    },
  );
});

describe('annotation aws-load-balancer-enable-tcp-udp-listener', () => {
  const name = aws('enable-tcp-udp-listener');

  it.each([['true'], ['false']])('accepts %s', (value) => {
    expect(() => parseAnnotations(makeService({ annotations: { [name]: value } }))).not.toThrow();
  });

  it('refuses anything else', () => {
    expect(() => parseAnnotations(makeService({ annotations: { [name]: 'yes' } }))).toThrow(
      /must be "true" or "false"/,
    );
  });
});

function attributesByPort(
  annotations: Record<string, string>,
): Record<string, Record<string, string>> {
  const service = makeService({ annotations });
  const desired = buildDesiredLoadBalancer({
    service,
    hosts: [],
    settings: testProviderSettings,
    options: parseAnnotations(service),
    subnets: [{ subnetId: 'subnet-a', availabilityZone: 'us-east-1a' }],
  });
  return Object.fromEntries(desired.targetGroups.map((tg) => [tg.key, { ...tg.attributes }]));
}

describe('annotation aws-load-balancer-target-group-attributes.<port>', () => {
  const all = aws('target-group-attributes');
  const port = (n: number) => `${all}.${n}`;

  it('overrides the annotation for all ports on that port only; an empty value keeps the common one', () => {
    expect(
      attributesByPort({
        [all]: 'deregistration_delay.timeout_seconds=30,preserve_client_ip.enabled=true',
        [port(443)]: 'deregistration_delay.timeout_seconds=5,preserve_client_ip.enabled=',
      }),
    ).toEqual({
      '80': { 'deregistration_delay.timeout_seconds': '30', 'preserve_client_ip.enabled': 'true' },
      '443': { 'deregistration_delay.timeout_seconds': '5', 'preserve_client_ip.enabled': 'true' },
    });
  });

  it('takes a stickiness key as the user’s choice, so spec.sessionAffinity no longer sets stickiness', () => {
    const made = makeService({ annotations: { [port(80)]: 'stickiness.enabled=false' } });
    const service = { ...made, spec: { ...made.spec, sessionAffinity: 'ClientIP' } };
    const desired = buildDesiredLoadBalancer({
      service,
      hosts: [],
      settings: testProviderSettings,
      options: parseAnnotations(service),
      subnets: [{ subnetId: 'subnet-a', availabilityZone: 'us-east-1a' }],
    });
    expect(desired.targetGroups.map((tg) => tg.attributes['stickiness.enabled'])).toEqual([
      'false',
      undefined,
    ]);
  });

  it.each([
    [port(8080), 'deregistration_delay.timeout_seconds=5', /Service has no port 8080/],
    [`${all}.http`, 'deregistration_delay.timeout_seconds=5', /must end in a Service port number/],
    [port(80), 'load_balancing.algorithm.type=round_robin', /unsupported attribute/],
    [port(80), 'deregistration_delay.timeout_seconds=9999', /invalid value/],
  ])('refuses %s: %s', (name, value, message) => {
    expect(() => attributesByPort({ [name]: value })).toThrow(TerminalError);
    expect(() => attributesByPort({ [name]: value })).toThrow(message);
  });
});

describe('target group attributes AWS accepts for NLBs', () => {
  const all = aws('target-group-attributes');

  it.each([
    ['target_group_health.dns_failover.minimum_healthy_targets.count', ['1', '500', 'off']],
    ['target_group_health.dns_failover.minimum_healthy_targets.percentage', ['1', '100', 'off']],
    ['target_group_health.unhealthy_state_routing.minimum_healthy_targets.count', ['1', '1000']],
    [
      'target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage',
      ['50', 'off'],
    ],
    ['target_health_state.unhealthy.connection_termination.enabled', ['true', 'false']],
    ['target_health_state.unhealthy.draining_interval_seconds', ['0', '360000']],
  ])('accepts %s', (key, values) => {
    for (const value of values) {
      expect(attributesByPort({ [all]: `${key}=${value}` })['80']?.[key]).toBe(value);
    }
  });

  it.each([
    ['target_group_health.dns_failover.minimum_healthy_targets.count', '0'],
    ['target_group_health.dns_failover.minimum_healthy_targets.percentage', '101'],
    ['target_group_health.unhealthy_state_routing.minimum_healthy_targets.count', 'off'],
    ['target_health_state.unhealthy.connection_termination.enabled', 'yes'],
    ['target_health_state.unhealthy.draining_interval_seconds', '360001'],
  ])('refuses %s=%s', (key, value) => {
    expect(() => attributesByPort({ [all]: `${key}=${value}` })).toThrow(/invalid value/);
  });
});
