import { describe, expect, it } from 'vitest';
import { parseAnnotations } from '../../../functions/nlb/model/annotations';
import {
  buildDesiredLoadBalancer,
  ingressRuleCount,
  type ProviderSettings,
} from '../../../functions/nlb/model/desired';
import {
  loadBalancerName,
  ownershipOf,
  resourceTags,
  securityGroupName,
  targetGroupName,
} from '../../../functions/nlb/model/naming';
import { ownTagCount } from '../../../functions/nlb/model/tag-rules';
import type {
  DesiredLoadBalancer,
  DesiredTargetGroup,
  HealthCheck,
  IngressRule,
  SubnetRef,
} from '../../../functions/nlb/model/types';
import { TerminalError } from '../../../functions/core/errors';
import type { Host } from '../../../functions/core/hosts';
import type { ServicePort } from '../../../functions/core/objects';
import { testProviderSettings } from '../../support/nlb-settings';
import { makeService, type ServiceOptions } from '../../../kit/core-objects';

const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;

const settings: ProviderSettings = testProviderSettings;

/** Three subnets, deliberately not in Availability Zone order. */
const subnets: readonly SubnetRef[] = [
  { subnetId: 'subnet-c', availabilityZone: 'us-east-1c' },
  { subnetId: 'subnet-a', availabilityZone: 'us-east-1a' },
  { subnetId: 'subnet-b', availabilityZone: 'us-east-1b' },
];

const instanceId = (n: number) => `i-${n.toString(16).padStart(17, '0')}`;
const host = (n: number, name = `node-${n}`): Host => ({
  name,
  providerID: `aws:///us-east-1a/${instanceId(n)}`,
  instanceId: instanceId(n),
});

interface Case {
  readonly service?: ServiceOptions;
  readonly hosts?: readonly Host[];
  readonly subnets?: readonly SubnetRef[];
  readonly settings?: Partial<ProviderSettings>;
}

function build(c: Case = {}): DesiredLoadBalancer {
  const service = makeService(c.service);
  return buildDesiredLoadBalancer({
    service,
    hosts: c.hosts ?? [host(1), host(2)],
    settings: { ...settings, ...c.settings },
    options: parseAnnotations(service),
    subnets: c.subnets ?? subnets,
  });
}

/** The TerminalError build throws, or a failure when it builds. */
function buildError(c: Case): TerminalError {
  try {
    build(c);
  } catch (error) {
    if (error instanceof TerminalError) return error;
    throw error;
  }
  throw new Error('built without a terminal error');
}

const annotated = (annotations: Record<string, string>, more: ServiceOptions = {}): Case => ({
  service: { ...more, annotations },
});

function targetGroup(desired: DesiredLoadBalancer, key: string): DesiredTargetGroup {
  const found = desired.targetGroups.find((tg) => tg.key === key);
  if (found === undefined) throw new Error(`no target group ${key}`);
  return found;
}

const healthChecks = (desired: DesiredLoadBalancer) =>
  desired.targetGroups.map((tg) => tg.healthCheck);

const acmArn = 'arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d';
const iamArn = 'arn:aws:iam::123456789012:server-certificate/legacy-cert';
const tlsPolicy = 'ELBSecurityPolicy-TLS13-1-2-2021-06';

const udpPort: ServicePort = { name: 'syslog', protocol: 'UDP', port: 514, nodePort: 30514 };
const dnsPorts: ServicePort[] = [
  { name: 'dns-tcp', protocol: 'TCP', port: 53, nodePort: 30053 },
  { name: 'dns-udp', protocol: 'UDP', port: 53, nodePort: 30053 },
];

describe('health checks', () => {
  // The defaults the registry documents: TCP on traffic-port, interval 10, timeout 10 for TCP
  // and 6 for HTTP(S), thresholds 3 (2 for Local); HTTP /healthz for Local and UDP-only ports.
  const tcpDefault: HealthCheck = {
    protocol: 'TCP',
    port: 'traffic-port',
    intervalSeconds: 10,
    timeoutSeconds: 10,
    healthyThreshold: 3,
    unhealthyThreshold: 3,
  };
  const local: ServiceOptions = {
    spec: { externalTrafficPolicy: 'Local', healthCheckNodePort: 32001 },
  };
  const localCheck: HealthCheck = {
    protocol: 'HTTP',
    port: '32001',
    path: '/healthz',
    successCodes: '200-399',
    intervalSeconds: 10,
    timeoutSeconds: 6,
    healthyThreshold: 2,
    unhealthyThreshold: 2,
  };

  it('is TCP on the traffic port by default', () => {
    expect(healthChecks(build())).toEqual([tcpDefault, tcpDefault]);
  });

  it('is HTTP /healthz on the healthCheckNodePort for externalTrafficPolicy Local', () => {
    expect(healthChecks(build({ service: local }))).toEqual([localCheck, localCheck]);
  });

  it('stays TCP for externalTrafficPolicy Local without a healthCheckNodePort', () => {
    const desired = build({ service: { spec: { externalTrafficPolicy: 'Local' } } });
    expect(healthChecks(desired)).toEqual([tcpDefault, tcpDefault]);
  });

  it('is HTTP /healthz on kube-proxy port 10256 for a UDP-only port', () => {
    const desired = build({ service: { ports: [udpPort] } });
    expect(targetGroup(desired, '514').protocol).toBe('UDP');
    expect(targetGroup(desired, '514').healthCheck).toEqual({ ...localCheck, port: '10256' });
  });

  it('stays TCP on the traffic port for a TCP_UDP port (TCP answers there)', () => {
    const desired = build({ service: { ports: dnsPorts } });
    expect(targetGroup(desired, '53').protocol).toBe('TCP_UDP');
    expect(targetGroup(desired, '53').healthCheck).toEqual(tcpDefault);
  });

  it('uses the healthCheckNodePort for a UDP port under externalTrafficPolicy Local', () => {
    const desired = build({ service: { ...local, ports: [udpPort] } });
    expect(targetGroup(desired, '514').healthCheck).toEqual(localCheck);
  });

  it('switching the protocol from TCP to HTTP gives path "/", codes "200-399" and timeout 6', () => {
    const desired = build(annotated({ [aws('healthcheck-protocol')]: 'HTTP' }));
    expect(healthChecks(desired)[0]).toEqual({
      ...tcpDefault,
      protocol: 'HTTP',
      path: '/',
      successCodes: '200-399',
      timeoutSeconds: 6,
    });
  });

  it('switching Local to TCP drops path and codes and uses the TCP timeout', () => {
    const desired = build(annotated({ [aws('healthcheck-protocol')]: 'TCP' }, local));
    expect(healthChecks(desired)[0]).toEqual({
      protocol: 'TCP',
      port: '32001',
      intervalSeconds: 10,
      timeoutSeconds: 10,
      healthyThreshold: 2,
      unhealthyThreshold: 2,
    });
  });

  it('takes every health check annotation over the defaults', () => {
    const desired = build(
      annotated({
        [aws('healthcheck-protocol')]: 'HTTPS',
        [aws('healthcheck-port')]: '8443',
        [aws('healthcheck-path')]: '/ready',
        [aws('healthcheck-interval')]: '30',
        [aws('healthcheck-timeout')]: '5',
        [aws('healthcheck-healthy-threshold')]: '4',
        [aws('healthcheck-unhealthy-threshold')]: '5',
        [aws('healthcheck-success-codes')]: '200,204',
      }),
    );
    const custom: HealthCheck = {
      protocol: 'HTTPS',
      port: '8443',
      path: '/ready',
      successCodes: '200,204',
      intervalSeconds: 30,
      timeoutSeconds: 5,
      healthyThreshold: 4,
      unhealthyThreshold: 5,
    };
    expect(healthChecks(desired)).toEqual([custom, custom]);
  });

  it('ignores a path for a TCP health check', () => {
    const desired = build(annotated({ [aws('healthcheck-path')]: '/ready' }));
    expect(healthChecks(desired)[0]).toEqual(tcpDefault);
  });
});

describe('TLS', () => {
  const tcpListener = (port: number) => ({
    port,
    protocol: 'TCP',
    targetGroupKey: String(port),
    certificateArns: [],
    sslPolicy: undefined,
  });
  const tlsListener = (port: number, certificateArns = [acmArn], sslPolicy = tlsPolicy) => ({
    port,
    protocol: 'TLS',
    targetGroupKey: String(port),
    certificateArns,
    sslPolicy,
  });

  it('makes every port a TLS listener with the default policy when only a certificate is set', () => {
    const desired = build(annotated({ [aws('ssl-cert')]: acmArn }));
    expect(desired.listeners).toEqual([tlsListener(80), tlsListener(443)]);
    expect(desired.targetGroups.map((tg) => tg.protocol)).toEqual(['TCP', 'TCP']);
  });

  it.each(['443', 'https'])('makes only the ssl-ports TLS (by %j)', (sslPorts) => {
    const desired = build(annotated({ [aws('ssl-cert')]: acmArn, [aws('ssl-ports')]: sslPorts }));
    expect(desired.listeners).toEqual([tcpListener(80), tlsListener(443)]);
    expect(desired.targetGroups.map((tg) => tg.protocol)).toEqual(['TCP', 'TCP']);
  });

  it('puts every certificate, the default first, and the chosen policy on the listener', () => {
    const desired = build(
      annotated({
        [aws('ssl-cert')]: `${acmArn},${iamArn}`,
        [aws('ssl-ports')]: '443',
        [aws('ssl-negotiation-policy')]: 'ELBSecurityPolicy-FS-1-2-Res-2020-10',
      }),
    );
    expect(desired.listeners[1]).toEqual(
      tlsListener(443, [acmArn, iamArn], 'ELBSecurityPolicy-FS-1-2-Res-2020-10'),
    );
  });

  it('re-encrypts to TLS target groups with backend-protocol ssl, in new target groups', () => {
    const annotations = { [aws('ssl-cert')]: acmArn, [aws('ssl-ports')]: '443' };
    const tcpBackend = build(annotated(annotations));
    const sslBackend = build(annotated({ ...annotations, [aws('backend-protocol')]: 'ssl' }));
    expect(sslBackend.targetGroups.map((tg) => [tg.key, tg.protocol])).toEqual([
      ['80', 'TCP'],
      ['443', 'TLS'],
    ]);
    expect(targetGroup(sslBackend, '443').name).toBe(
      targetGroupName('c1', makeService(), '443', 'TLS', 30443),
    );
    expect(targetGroup(sslBackend, '443').name).not.toBe(targetGroup(tcpBackend, '443').name);
    expect(targetGroup(sslBackend, '80').name).toBe(targetGroup(tcpBackend, '80').name);
  });

  it('rejects ssl-ports naming a port the Service does not have', () => {
    const error = buildError(
      annotated({ [aws('ssl-cert')]: acmArn, [aws('ssl-ports')]: '443,metrics,8443' }),
    );
    expect(error.message).toBe(
      `annotation ${aws('ssl-ports')}: "metrics" is not a port of this Service; ` +
        `annotation ${aws('ssl-ports')}: "8443" is not a port of this Service`,
    );
  });

  it('rejects ssl-ports without a certificate', () => {
    expect(buildError(annotated({ [aws('ssl-ports')]: '443' })).message).toBe(
      `annotation ${aws('ssl-ports')} needs a certificate in ${aws('ssl-cert')}`,
    );
  });

  it.each<[string, Record<string, string>, ServicePort[], string]>([
    [
      'every port, a UDP one included',
      {},
      [{ name: 'https', protocol: 'TCP', port: 443, nodePort: 30443 }, udpPort],
      'port 514 is UDP: TLS listeners need TCP ports',
    ],
    [
      'a UDP port named in ssl-ports',
      { [aws('ssl-ports')]: 'syslog' },
      [{ name: 'https', protocol: 'TCP', port: 443, nodePort: 30443 }, udpPort],
      'port 514 is UDP: TLS listeners need TCP ports',
    ],
    [
      'the TCP half of a TCP_UDP port',
      { [aws('ssl-ports')]: 'dns-tcp' },
      dnsPorts,
      'port 53 is TCP_UDP: TLS listeners need TCP ports',
    ],
  ])('rejects TLS on %s', (_case, annotations, ports, message) => {
    const error = buildError(annotated({ [aws('ssl-cert')]: acmArn, ...annotations }, { ports }));
    expect(error.message).toBe(message);
  });
});

describe('security group ingress', () => {
  const rule = (protocol: IngressRule['protocol'], port: number, cidr: string): IngressRule => ({
    protocol,
    fromPort: port,
    toPort: port,
    cidr,
  });
  // ICMP type 3 ("destination unreachable") code 4 ("fragmentation needed"), for path MTU discovery.
  const icmpFragmentationNeeded = (cidr: string): IngressRule => ({
    protocol: 'icmp',
    fromPort: 3,
    toPort: 4,
    cidr,
  });

  it('opens each listener port and ICMP 3/4 to everyone by default', () => {
    expect(build().securityGroup.ingress).toEqual([
      rule('tcp', 80, '0.0.0.0/0'),
      rule('tcp', 443, '0.0.0.0/0'),
      icmpFragmentationNeeded('0.0.0.0/0'),
    ]);
  });

  it('leaves the ICMP rule out with enable-icmp-for-path-mtu-discovery: off, and keeps it with on', () => {
    const withIcmp = (value: string) =>
      build({
        service: {
          annotations: {
            'service.beta.kubernetes.io/aws-load-balancer-enable-icmp-for-path-mtu-discovery':
              value,
          },
        },
      }).securityGroup.ingress;
    expect(withIcmp('off')).toEqual([rule('tcp', 80, '0.0.0.0/0'), rule('tcp', 443, '0.0.0.0/0')]);
    expect(withIcmp('on')).toEqual(build().securityGroup.ingress);
  });

  it('opens tcp and udp for a TCP_UDP port and udp for a UDP port', () => {
    const desired = build({ service: { ports: [...dnsPorts, udpPort] } });
    expect(desired.securityGroup.ingress).toEqual([
      rule('tcp', 53, '0.0.0.0/0'),
      rule('udp', 53, '0.0.0.0/0'),
      rule('udp', 514, '0.0.0.0/0'),
      icmpFragmentationNeeded('0.0.0.0/0'),
    ]);
  });

  it('repeats every rule, ICMP included, for each source range', () => {
    const desired = build({
      service: { spec: { loadBalancerSourceRanges: ['192.168.0.0/16', '10.0.0.0/8'] } },
    });
    expect(desired.securityGroup.ingress).toEqual([
      rule('tcp', 80, '10.0.0.0/8'),
      rule('tcp', 443, '10.0.0.0/8'),
      icmpFragmentationNeeded('10.0.0.0/8'),
      rule('tcp', 80, '192.168.0.0/16'),
      rule('tcp', 443, '192.168.0.0/16'),
      icmpFragmentationNeeded('192.168.0.0/16'),
    ]);
  });

  it('opens tcp for a TLS listener', () => {
    const desired = build(annotated({ [aws('ssl-cert')]: acmArn }));
    expect(desired.securityGroup.ingress.map((r) => r.protocol)).toEqual(['tcp', 'tcp', 'icmp']);
  });

  // One TCP port: two rules (the port and ICMP) per range.
  const ranges = (count: number) => Array.from({ length: count }, (_, i) => `10.${i}.0.0/16`);
  const onePort: ServicePort[] = [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }];

  it('accepts exactly 60 rules', () => {
    const desired = build({
      service: { ports: onePort, spec: { loadBalancerSourceRanges: ranges(30) } },
    });
    expect(desired.securityGroup.ingress).toHaveLength(60);
  });

  it('counts the rules for many ranges on many TCP_UDP listeners without building them', () => {
    const tcpUdp: ServicePort[] = Array.from({ length: 50 }, (_, i) => [
      { name: `t${i}`, protocol: 'TCP', port: 1000 + i, nodePort: 30000 + i },
      { name: `u${i}`, protocol: 'UDP', port: 1000 + i, nodePort: 30000 + i },
    ]).flat();
    const many = Array.from(
      { length: 1000 },
      (_, i) => `10.${i % 250}.${Math.floor(i / 250)}.0/24`,
    );
    const error = buildError({
      service: { ports: tcpUdp, spec: { loadBalancerSourceRanges: many } },
    });
    // 1000 ranges × (50 listeners × tcp and udp + one ICMP rule).
    expect(error.message).toBe(
      '1000 source ranges on 50 listeners need 101000 security group rules, more than the 60 a security group allows; use fewer, wider ranges',
    );
  });

  it.each<[string, ServicePort[], number]>([
    [
      'two TCP ports',
      [...onePort, { name: 'https', protocol: 'TCP', port: 443, nodePort: 30443 }],
      6,
    ],
    ['a TCP_UDP and a UDP port', [...dnsPorts, udpPort], 8],
  ])('counts exactly the rules it builds (%s, two ranges)', (_what, ports, expected) => {
    const desired = build({
      service: { ports, spec: { loadBalancerSourceRanges: ['10.0.0.0/8', '192.168.0.0/16'] } },
    });
    expect(ingressRuleCount(desired.listeners, 2)).toBe(expected);
    expect(desired.securityGroup.ingress).toHaveLength(expected);
  });

  it('rejects more than the 60 rules a security group allows', () => {
    const error = buildError({
      service: { ports: onePort, spec: { loadBalancerSourceRanges: ranges(31) } },
    });
    expect(error.message).toBe(
      '31 source ranges on 1 listeners need 62 security group rules, more than the 60 a security group allows; use fewer, wider ranges',
    );
  });
});

describe('targets', () => {
  it('registers the unique instance IDs, sorted, in every target group', () => {
    const desired = build({ hosts: [host(3), host(1), host(3, 'node-3-renamed'), host(2)] });
    for (const tg of desired.targetGroups) {
      expect(tg.targets).toEqual([instanceId(1), instanceId(2), instanceId(3)]);
    }
  });

  const hosts = (count: number) => Array.from({ length: count }, (_, i) => host(i + 1));

  it('accepts 1000 hosts', () => {
    expect(build({ hosts: hosts(1000) }).targetGroups[0]?.targets).toHaveLength(1000);
  });

  it('rejects more than the 1000 targets a target group can hold', () => {
    expect(buildError({ hosts: hosts(1001) }).message).toBe(
      '1001 eligible nodes exceed the 1000 targets a target group can hold; exclude nodes with the node.kubernetes.io/exclude-from-external-load-balancers label (alpha.service-controller.kubernetes.io/exclude-balancer with the seed node policy)',
    );
  });
});

describe('subnet mappings', () => {
  const eips = 'eipalloc-aaaaaaaa,eipalloc-bbbbbbbb,eipalloc-cccccccc';
  const ips = '10.0.1.10,10.0.2.10,10.0.3.10';

  it('lists the subnets sorted by Availability Zone', () => {
    expect(build().subnetMappings).toEqual([
      { subnetId: 'subnet-a' },
      { subnetId: 'subnet-b' },
      { subnetId: 'subnet-c' },
    ]);
  });

  it('pairs Elastic IPs, in order, with the subnets sorted by zone (internet-facing)', () => {
    const desired = build(
      annotated({ [aws('scheme')]: 'internet-facing', [aws('eip-allocations')]: eips }),
    );
    expect(desired.subnetMappings).toEqual([
      { subnetId: 'subnet-a', allocationId: 'eipalloc-aaaaaaaa' },
      { subnetId: 'subnet-b', allocationId: 'eipalloc-bbbbbbbb' },
      { subnetId: 'subnet-c', allocationId: 'eipalloc-cccccccc' },
    ]);
  });

  it('accepts Elastic IPs when internet-facing is the deployment default', () => {
    const desired = build({
      ...annotated({ [aws('eip-allocations')]: eips }),
      settings: { defaultScheme: 'internet-facing' },
    });
    expect(desired.subnetMappings.map((m) => m.allocationId)).toEqual([
      'eipalloc-aaaaaaaa',
      'eipalloc-bbbbbbbb',
      'eipalloc-cccccccc',
    ]);
  });

  it('pairs private IPv4 addresses, in order, with the subnets sorted by zone (internal)', () => {
    const desired = build(annotated({ [aws('private-ipv4-addresses')]: ips }));
    expect(desired.subnetMappings).toEqual([
      { subnetId: 'subnet-a', privateIPv4Address: '10.0.1.10' },
      { subnetId: 'subnet-b', privateIPv4Address: '10.0.2.10' },
      { subnetId: 'subnet-c', privateIPv4Address: '10.0.3.10' },
    ]);
  });

  const prefix = 'annotation service.beta.kubernetes.io/aws-load-balancer-';
  it.each<[string, Record<string, string>, string]>([
    [
      'Elastic IPs on an internal NLB',
      { [aws('eip-allocations')]: eips },
      `${prefix}eip-allocations needs an internet-facing load balancer`,
    ],
    [
      'fewer Elastic IPs than subnets',
      {
        [aws('scheme')]: 'internet-facing',
        [aws('eip-allocations')]: 'eipalloc-aaaaaaaa,eipalloc-bbbbbbbb',
      },
      `${prefix}eip-allocations lists 2 values for 3 subnets; give one per subnet`,
    ],
    [
      'private addresses on an internet-facing NLB',
      { [aws('scheme')]: 'internet-facing', [aws('private-ipv4-addresses')]: ips },
      `${prefix}private-ipv4-addresses needs an internal load balancer`,
    ],
    [
      'more private addresses than subnets',
      { [aws('private-ipv4-addresses')]: `${ips},10.0.4.10` },
      `${prefix}private-ipv4-addresses lists 4 values for 3 subnets; give one per subnet`,
    ],
  ])('rejects %s', (_case, annotations, message) => {
    expect(buildError(annotated(annotations)).message).toBe(message);
  });
});

describe('attributes', () => {
  it('sets proxy_protocol_v2.enabled=true on every target group with proxy-protocol', () => {
    const desired = build(annotated({ [aws('proxy-protocol')]: '*' }));
    expect(desired.targetGroups.map((tg) => tg.attributes)).toEqual([
      { 'proxy_protocol_v2.enabled': 'true' },
      { 'proxy_protocol_v2.enabled': 'true' },
    ]);
  });

  it('adds proxy protocol to the target-group-attributes', () => {
    const desired = build(
      annotated({
        [aws('proxy-protocol')]: '*',
        [aws('target-group-attributes')]: 'deregistration_delay.timeout_seconds=30',
      }),
    );
    expect(targetGroup(desired, '80').attributes).toEqual({
      'deregistration_delay.timeout_seconds': '30',
      'proxy_protocol_v2.enabled': 'true',
    });
  });

  it('manages no target group attributes without annotations', () => {
    expect(build().targetGroups.map((tg) => tg.attributes)).toEqual([{}, {}]);
  });

  it.each([
    ['true', { 'load_balancing.cross_zone.enabled': 'true' }],
    ['false', { 'load_balancing.cross_zone.enabled': 'false' }],
  ])('cross-zone %s becomes the load balancer attribute', (value, expected) => {
    const desired = build(annotated({ [aws('cross-zone-load-balancing-enabled')]: value }));
    expect(desired.attributes).toEqual(expected);
  });

  it('manages no load balancer attribute without the cross-zone annotation', () => {
    expect(build().attributes).toEqual({});
  });
});

describe('tags', () => {
  const ownership = (resource: string) => ({
    'kubernetes.io/cluster/c1': 'owned',
    'serverless-service-controller.io/cluster': 'c1',
    'serverless-service-controller.io/service': 'default/web',
    'serverless-service-controller.io/service-uid': 'uid-1',
    'serverless-service-controller.io/resource': resource,
  });
  const desired = build({
    ...annotated({ [aws('additional-resource-tags')]: 'team=web,env=prod' }),
    settings: {
      defaultTags: {
        env: 'dev',
        'cost-center': 'cc-1',
        // A deployment default cannot take over an ownership tag.
        'serverless-service-controller.io/cluster': 'other',
      },
    },
  });
  // The Service's tags override the deployment's; the ownership tags override both.
  const extra = { team: 'web', env: 'prod', 'cost-center': 'cc-1' };

  it.each<[string, () => Readonly<Record<string, string>>, string]>([
    ['the load balancer', () => desired.tags, 'load-balancer'],
    ['the security group', () => desired.securityGroup.tags, 'security-group'],
    ['the target group for port 80', () => targetGroup(desired, '80').tags, 'target-group:80'],
    ['the target group for port 443', () => targetGroup(desired, '443').tags, 'target-group:443'],
  ])('tags %s with the ownership tags and the additional tags', (_resource, tags, resource) => {
    expect(tags()).toEqual({ ...extra, ...ownership(resource) });
    expect(ownershipOf(tags(), 'c1', makeService())).toBe('ours');
  });
});

describe('tag limits', () => {
  it('counts the controller’s own tags as naming.ts writes them', () => {
    expect(Object.keys(resourceTags('c1', makeService(), 'load-balancer', {}))).toHaveLength(
      ownTagCount,
    );
  });

  it('refuses deployment and Service tags that leave no room for ours within 50', () => {
    const defaultTags = Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [`default-${i}`, 'v']),
    );
    const annotation = Array.from({ length: 6 }, (_, i) => `svc-${i}=v`).join(',');
    const error = buildError({
      ...annotated({ [aws('additional-resource-tags')]: annotation }),
      settings: { defaultTags },
    });
    expect(error.message).toBe(
      `the deployment's 40 default tags and the 6 of annotation ${aws('additional-resource-tags')} make 46 tags, over the 45 that fit beside the controller's 5 (AWS allows 50 per resource)`,
    );
  });

  it('counts a Service tag that overrides a deployment tag once', () => {
    const defaultTags = Object.fromEntries(Array.from({ length: 45 }, (_, i) => [`t${i}`, 'v']));
    const desired = build({
      ...annotated({ [aws('additional-resource-tags')]: 't0=override' }),
      settings: { defaultTags },
    });
    expect(Object.keys(desired.tags)).toHaveLength(50);
    expect(desired.tags.t0).toBe('override');
  });
});

describe('the load balancer', () => {
  it('is named and placed from the settings and the Service', () => {
    const desired = build();
    expect(desired).toMatchObject({
      name: loadBalancerName('c1', makeService(), 'internal'),
      scheme: 'internal',
      backendSecurityGroupId: 'sg-backend',
      securityGroup: {
        name: securityGroupName('c1', makeService()),
        description: 'Frontend of the NLB for Service default/web',
        vpcId: 'vpc-1',
      },
    });
    expect(desired.targetGroups.map((tg) => [tg.key, tg.name, tg.protocol, tg.port])).toEqual([
      ['80', targetGroupName('c1', makeService(), '80', 'TCP', 30080), 'TCP', 30080],
      ['443', targetGroupName('c1', makeService(), '443', 'TCP', 30443), 'TCP', 30443],
    ]);
  });

  it('takes the scheme annotation over the deployment default', () => {
    const desired = build(annotated({ [aws('scheme')]: 'internet-facing' }));
    expect(desired.scheme).toBe('internet-facing');
    expect(desired.name).toBe(loadBalancerName('c1', makeService(), 'internet-facing'));
  });

  it('reports every problem in one error', () => {
    const error = buildError({
      ...annotated(
        { [aws('ssl-cert')]: acmArn, [aws('eip-allocations')]: 'eipalloc-aaaaaaaa' },
        { ports: [udpPort] },
      ),
      hosts: Array.from({ length: 1001 }, (_, i) => host(i + 1)),
    });
    expect(error.message).toBe(
      [
        'port 514 is UDP: TLS listeners need TCP ports',
        `annotation ${aws('eip-allocations')} needs an internet-facing load balancer`,
        `annotation ${aws('eip-allocations')} lists 1 values for 3 subnets; give one per subnet`,
        '1001 eligible nodes exceed the 1000 targets a target group can hold; exclude nodes with the node.kubernetes.io/exclude-from-external-load-balancers label (alpha.service-controller.kubernetes.io/exclude-balancer with the seed node policy)',
      ].join('; '),
    );
  });
});
