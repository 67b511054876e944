import { describe, expect, it } from 'vitest';
import { parseAnnotations } from '../../../functions/nlb/model/annotations';
import { buildDesiredLoadBalancer } from '../../../functions/nlb/model/desired';
import { wantsDeletionProtection } from '../../../functions/core/deletion-protection';
import { planChanges } from '../../../functions/nlb/model/plan';
import type { DesiredLoadBalancer, Observed } from '../../../functions/nlb/model/types';
import { TerminalError } from '../../../functions/core/errors';
import type { Service } from '../../../functions/core/objects';
import { makeService, type ServiceOptions } from '../../../kit/core-objects';
import { testProviderSettings } from '../../support/nlb-settings';

const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;
const acmArn = 'arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d';

const subnets = [
  { subnetId: 'subnet-a', availabilityZone: 'us-east-1a' },
  { subnetId: 'subnet-b', availabilityZone: 'us-east-1b' },
];

function build(options: ServiceOptions = {}, stickinessFromAffinityApplied?: boolean) {
  const service = makeService({ uid: 'uid-web', ...options });
  return buildDesiredLoadBalancer({
    service,
    hosts: [],
    settings: testProviderSettings,
    options: parseAnnotations(service),
    subnets,
    stickinessFromAffinityApplied,
  });
}

function terminal(run: () => unknown): TerminalError {
  try {
    run();
  } catch (error) {
    if (error instanceof TerminalError) return error;
    throw error;
  }
  throw new Error('no terminal error');
}

/** What AWS has after `desired` was applied, with the attributes it reports. */
function observedFrom(
  desired: DesiredLoadBalancer,
  tgAttributes: Record<string, string>,
): Observed {
  return {
    loadBalancer: {
      arn: 'arn:lb',
      name: desired.name,
      dnsName: 'lb.example',
      scheme: desired.scheme,
      subnetIds: desired.subnetMappings.map((m) => m.subnetId),
      pinnedAddresses: [],
      securityGroupIds: ['sg-1', testProviderSettings.backendSecurityGroupId ?? ''].filter(Boolean),
      tags: desired.tags,
      attributes: { ...desired.attributes },
    },
    listeners: [],
    targetGroups: desired.targetGroups.map((tg) => ({
      arn: `arn:tg:${tg.key}`,
      name: tg.name,
      protocol: tg.protocol,
      port: tg.port,
      healthCheck: tg.healthCheck,
      tags: tg.tags,
      attributes: tgAttributes,
      targets: [],
    })),
    securityGroup: {
      id: 'sg-1',
      name: 'sg',
      ingress: desired.securityGroup.ingress,
      tags: desired.securityGroup.tags,
    },
  };
}

describe('load balancer attributes in the desired model', () => {
  it('merges the attributes annotation with agreeing aliases, sorted by key', () => {
    const desired = build({
      annotations: {
        [aws('attributes')]: 'deletion_protection.enabled=true,access_logs.s3.bucket=logs',
        [aws('access-log-enabled')]: 'true',
        [aws('access-log-s3-bucket-name')]: 'logs',
      },
    });
    expect(desired.attributes).toEqual({
      'access_logs.s3.bucket': 'logs',
      'access_logs.s3.enabled': 'true',
      'deletion_protection.enabled': 'true',
    });
  });

  it('names both annotations when an alias contradicts the attributes annotation', () => {
    const error = terminal(() =>
      build({
        annotations: {
          [aws('attributes')]: 'access_logs.s3.bucket=a-logs',
          [aws('access-log-s3-bucket-name')]: 'b-logs',
        },
      }),
    );
    expect(error.message).toContain(aws('access-log-s3-bucket-name'));
    expect(error.message).toContain('access_logs.s3.bucket=a-logs');
  });

  it('plans a ModifyLoadBalancerAttributes with only the listed keys that differ', () => {
    const desired = build({
      annotations: { [aws('attributes')]: 'deletion_protection.enabled=true' },
    });
    const observed = observedFrom(desired, {});
    const drifted: Observed = {
      ...observed,
      loadBalancer: observed.loadBalancer && {
        ...observed.loadBalancer,
        attributes: { 'deletion_protection.enabled': 'false', 'access_logs.s3.enabled': 'true' },
      },
    };
    expect(planChanges(desired, drifted).steps).toContainEqual({
      kind: 'modifyLoadBalancerAttributes',
      attributes: { 'deletion_protection.enabled': 'true' },
    });
  });
});

describe('wantsDeletionProtection (read on delete, even when other annotations are invalid)', () => {
  const svc = (annotations: Record<string, string>): Service => makeService({ annotations });
  it.each([
    [{ [aws('attributes')]: 'deletion_protection.enabled=true' }, true],
    [
      { [aws('attributes')]: 'access_logs.s3.enabled=false, deletion_protection.enabled = true' },
      true,
    ],
    [{ [aws('attributes')]: 'deletion_protection.enabled=true', [aws('bogus')]: 'x' }, true],
    [{ [aws('attributes')]: 'deletion_protection.enabled=false' }, false],
    [{}, false],
  ])('%j → %s', (annotations, expected) => {
    expect(wantsDeletionProtection(svc(annotations))).toBe(expected);
  });
});

describe('spec.sessionAffinity as target group stickiness', () => {
  const clientIp = { spec: { sessionAffinity: 'ClientIP' } } as const;

  it('asks for source-IP stickiness on every target group for ClientIP', () => {
    expect(build(clientIp).targetGroups.map((tg) => tg.attributes)).toEqual([
      { 'stickiness.enabled': 'true', 'stickiness.type': 'source_ip' },
      { 'stickiness.enabled': 'true', 'stickiness.type': 'source_ip' },
    ]);
  });

  it('leaves TLS ports without stickiness, which AWS refuses on TLS listeners', () => {
    const desired = build({
      ...clientIp,
      annotations: { [aws('ssl-cert')]: acmArn, [aws('ssl-ports')]: '443' },
    });
    expect(desired.targetGroups.map((tg) => [tg.key, tg.attributes])).toEqual([
      ['80', { 'stickiness.enabled': 'true', 'stickiness.type': 'source_ip' }],
      ['443', {}],
    ]);
  });

  it('leaves stickiness to the annotation when it sets a stickiness key', () => {
    const desired = build({
      ...clientIp,
      annotations: { [aws('target-group-attributes')]: 'stickiness.enabled=false' },
    });
    expect(desired.targetGroups[0]?.attributes).toEqual({ 'stickiness.enabled': 'false' });
  });

  it('turns stickiness off after None only when affinity had turned it on', () => {
    expect(build({}, true).targetGroups[0]?.attributes).toEqual({ 'stickiness.enabled': 'false' });
    expect(build({}, false).targetGroups[0]?.attributes).toEqual({});
  });

  it('plans the switch off as one attribute change per target group', () => {
    const desired = build({}, true);
    const steps = planChanges(
      desired,
      observedFrom(desired, { 'stickiness.enabled': 'true', 'stickiness.type': 'source_ip' }),
    ).steps.filter((s) => s.kind === 'modifyTargetGroupAttributes');
    expect(steps).toEqual([
      {
        kind: 'modifyTargetGroupAttributes',
        key: '80',
        attributes: { 'stickiness.enabled': 'false' },
      },
      {
        kind: 'modifyTargetGroupAttributes',
        key: '443',
        attributes: { 'stickiness.enabled': 'false' },
      },
    ]);
  });
});
