import { describe, expect, it } from 'vitest';
import { annotationRegistry, parseAnnotations } from '../../../functions/nlb/model/annotations';
import {
  type LoadBalancerOptions,
  type Mutability,
} from '../../../functions/nlb/model/annotation-types';
import { sourceRanges } from '../../../functions/nlb/model/source-ranges';
import { quoted } from '../../../functions/core/echo';
import { TerminalError } from '../../../functions/core/errors';
import { makeService } from '../../../kit/core-objects';

const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;
const legacySourceRanges = 'service.beta.kubernetes.io/load-balancer-source-ranges';

const acmArn = 'arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d';
const iamArn = 'arn:aws:iam::123456789012:server-certificate/legacy-cert';

/** The options a legacy one-attribute annotation gives. */
const aliased = (suffix: string, key: string, value: string): Partial<LoadBalancerOptions> => ({
  loadBalancerAttributeAliases: new Map([[key, { annotation: aws(suffix), value }]]),
});

/** What parseAnnotations returns for a Service without annotations. */
const defaults = (): LoadBalancerOptions => ({
  healthCheck: {},
  additionalTags: {},
  targetGroupAttributes: {},
  proxyProtocol: false,
  certificateArns: [],
  backendProtocol: 'tcp',
});

const parse = (annotations: Record<string, string>) =>
  parseAnnotations(makeService({ annotations }));

/** The TerminalError parseAnnotations throws, or a failure when it does not throw one. */
function parseError(annotations: Record<string, string>): TerminalError {
  try {
    parse(annotations);
  } catch (error) {
    if (error instanceof TerminalError) return error;
    throw error;
  }
  throw new Error(`no error for ${JSON.stringify(annotations)}`);
}

/** Valid values for every annotation, with the options they give. */
const validCases: [string, string, Partial<LoadBalancerOptions>][] = [
  [aws('scheme'), 'internet-facing', { scheme: 'internet-facing' }],
  // Read by the core (per-Service host sets): the registry validates it and sets no option.
  [aws('target-node-labels'), 'example.com/role=ingress, zone=a', {}],
  [aws('enable-icmp-for-path-mtu-discovery'), 'off', { pathMtuDiscovery: false }],
  [aws('scheme'), 'internal', { scheme: 'internal' }],
  [aws('internal'), 'true', { scheme: 'internal' }],
  [aws('internal'), 'false', { scheme: 'internet-facing' }],
  // Legacy semantics: anything but "false" means internal (the historical value was a CIDR).
  [aws('internal'), '0.0.0.0/0', { scheme: 'internal' }],
  [aws('subnets'), 'subnet-0a, public-b ,', { subnets: ['subnet-0a', 'public-b'] }],
  [aws('healthcheck-protocol'), 'HTTP', { healthCheck: { protocol: 'HTTP' } }],
  [aws('healthcheck-protocol'), 'https', { healthCheck: { protocol: 'HTTPS' } }],
  [aws('healthcheck-protocol'), 'tcp', { healthCheck: { protocol: 'TCP' } }],
  [aws('healthcheck-port'), 'traffic-port', { healthCheck: { port: 'traffic-port' } }],
  [aws('healthcheck-port'), '8080', { healthCheck: { port: '8080' } }],
  [aws('healthcheck-port'), '65535', { healthCheck: { port: '65535' } }],
  [aws('healthcheck-path'), '/ready', { healthCheck: { path: '/ready' } }],
  [aws('healthcheck-interval'), '5', { healthCheck: { intervalSeconds: 5 } }],
  [aws('healthcheck-interval'), '300', { healthCheck: { intervalSeconds: 300 } }],
  [aws('healthcheck-timeout'), '2', { healthCheck: { timeoutSeconds: 2 } }],
  [aws('healthcheck-timeout'), '120', { healthCheck: { timeoutSeconds: 120 } }],
  [aws('healthcheck-healthy-threshold'), '2', { healthCheck: { healthyThreshold: 2 } }],
  [aws('healthcheck-healthy-threshold'), '10', { healthCheck: { healthyThreshold: 10 } }],
  [aws('healthcheck-unhealthy-threshold'), '2', { healthCheck: { unhealthyThreshold: 2 } }],
  [aws('healthcheck-unhealthy-threshold'), '10', { healthCheck: { unhealthyThreshold: 10 } }],
  [aws('healthcheck-success-codes'), '200', { healthCheck: { successCodes: '200' } }],
  [aws('healthcheck-success-codes'), '200-399', { healthCheck: { successCodes: '200-399' } }],
  [aws('healthcheck-success-codes'), '200,204', { healthCheck: { successCodes: '200,204' } }],
  [
    aws('cross-zone-load-balancing-enabled'),
    'true',
    aliased('cross-zone-load-balancing-enabled', 'load_balancing.cross_zone.enabled', 'true'),
  ],
  [
    aws('cross-zone-load-balancing-enabled'),
    'false',
    aliased('cross-zone-load-balancing-enabled', 'load_balancing.cross_zone.enabled', 'false'),
  ],
  [
    aws('access-log-enabled'),
    'true',
    aliased('access-log-enabled', 'access_logs.s3.enabled', 'true'),
  ],
  [
    aws('access-log-s3-bucket-name'),
    'my-logs.example',
    aliased('access-log-s3-bucket-name', 'access_logs.s3.bucket', 'my-logs.example'),
  ],
  [
    aws('access-log-s3-bucket-prefix'),
    'nlb/prod',
    aliased('access-log-s3-bucket-prefix', 'access_logs.s3.prefix', 'nlb/prod'),
  ],
  [
    aws('attributes'),
    'deletion_protection.enabled=true, access_logs.s3.enabled=true,access_logs.s3.bucket=logs,access_logs.s3.prefix=p,load_balancing.cross_zone.enabled=false,dns_record.client_routing_policy=availability_zone_affinity,ipv6.deny_all_igw_traffic=true,zonal_shift.config.enabled=true,secondary_ips.auto_assigned.per_subnet=2',
    {
      loadBalancerAttributes: new Map([
        ['deletion_protection.enabled', 'true'],
        ['access_logs.s3.enabled', 'true'],
        ['access_logs.s3.bucket', 'logs'],
        ['access_logs.s3.prefix', 'p'],
        ['load_balancing.cross_zone.enabled', 'false'],
        ['dns_record.client_routing_policy', 'availability_zone_affinity'],
        ['ipv6.deny_all_igw_traffic', 'true'],
        ['zonal_shift.config.enabled', 'true'],
        ['secondary_ips.auto_assigned.per_subnet', '2'],
      ]),
    },
  ],
  [
    aws('additional-resource-tags'),
    'team=web, env = prod,note=a=b',
    { additionalTags: { team: 'web', env: 'prod', note: 'a=b' } },
  ],
  [
    aws('target-group-attributes'),
    'deregistration_delay.timeout_seconds=30,stickiness.enabled=true,stickiness.type=source_ip',
    {
      targetGroupAttributes: {
        'deregistration_delay.timeout_seconds': '30',
        'stickiness.enabled': 'true',
        'stickiness.type': 'source_ip',
      },
    },
  ],
  [
    aws('target-group-attributes'),
    'load_balancing.cross_zone.enabled=use_load_balancer_configuration',
    {
      targetGroupAttributes: {
        'load_balancing.cross_zone.enabled': 'use_load_balancer_configuration',
      },
    },
  ],
  [aws('proxy-protocol'), '*', { proxyProtocol: true }],
  [aws('ssl-cert'), `${acmArn}, ${iamArn}`, { certificateArns: [acmArn, iamArn] }],
  [aws('ssl-ports'), '443, https', { sslPorts: ['443', 'https'] }],
  // `*` means every port, which is what an unset sslPorts means.
  [aws('ssl-ports'), '*', {}],
  [
    aws('ssl-negotiation-policy'),
    'ELBSecurityPolicy-TLS13-1-2-2021-06',
    { sslPolicy: 'ELBSecurityPolicy-TLS13-1-2-2021-06' },
  ],
  [aws('alpn-policy'), 'HTTP2Preferred', { alpnPolicy: 'HTTP2Preferred' }],
  [aws('alpn-policy'), 'None', { alpnPolicy: 'None' }],
  [aws('name'), 'shop-frontend', { loadBalancerName: 'shop-frontend' }],
  [aws('proxy-protocol-per-target-group'), '80, 443', { proxyProtocolPorts: [80, 443] }],
  [aws('enable-tcp-udp-listener'), 'true', {}],
  [
    aws('target-group-attributes.443'),
    'deregistration_delay.timeout_seconds=120,preserve_client_ip.enabled=',
    {
      targetGroupAttributesByPort: new Map([
        [443, { 'deregistration_delay.timeout_seconds': '120', 'preserve_client_ip.enabled': '' }],
      ]),
    },
  ],
  [
    aws('listener-attributes.TCP-8080'),
    'tcp.idle_timeout.seconds=6000',
    { listenerAttributes: new Map([['TCP-8080', { 'tcp.idle_timeout.seconds': '6000' }]]) },
  ],
  [aws('backend-protocol'), 'ssl', { backendProtocol: 'ssl' }],
  [aws('backend-protocol'), 'tcp', { backendProtocol: 'tcp' }],
  [
    aws('eip-allocations'),
    'eipalloc-0123456789abcdef0, eipalloc-12345678',
    { eipAllocations: ['eipalloc-0123456789abcdef0', 'eipalloc-12345678'] },
  ],
  [
    aws('private-ipv4-addresses'),
    '10.0.1.10,10.0.2.10',
    { privateIPv4Addresses: ['10.0.1.10', '10.0.2.10'] },
  ],
  [
    aws('security-groups'),
    'sg-0123456789abcdef0, team-a lb, sg-0123456789abcdef0',
    { securityGroups: ['sg-0123456789abcdef0', 'team-a lb'] },
  ],
  [aws('manage-backend-security-group-rules'), 'true', { manageBackendSecurityGroupRules: true }],
  [aws('manage-backend-security-group-rules'), 'false', { manageBackendSecurityGroupRules: false }],
  [
    aws('security-group-prefix-lists'),
    'pl-00000001, pl-0123456789abcdef0',
    { securityGroupPrefixLists: ['pl-00000001', 'pl-0123456789abcdef0'] },
  ],
  // Accepted for compatibility only: they change no option.
  [aws('type'), 'nlb', {}],
  [aws('type'), 'external', {}],
  [aws('type'), 'nlb-ip', { targetType: 'ip' }],
  [aws('nlb-target-type'), 'instance', { targetType: 'instance' }],
  [aws('nlb-target-type'), 'ip', { targetType: 'ip' }],
  [aws('ip-address-type'), 'ipv4', { ipAddressType: 'ipv4' }],
  [aws('ip-address-type'), 'dualstack', { ipAddressType: 'dualstack' }],
  [
    aws('ipv6-addresses'),
    '2600:1f18:1:1::a, 2600:1F18:1:2::A',
    { ipv6Addresses: ['2600:1f18:1:1::a', '2600:1F18:1:2::A'] },
  ],
  [
    legacySourceRanges,
    '10.0.0.0/8, 192.168.0.0/16',
    { sourceRanges: ['10.0.0.0/8', '192.168.0.0/16'] },
  ],
];

describe('parseAnnotations: valid values', () => {
  it.each(validCases)('%s: %j parses', (name, value, expected) => {
    expect(parse({ [name]: value })).toEqual({ ...defaults(), ...expected });
  });

  it('returns the defaults for a Service without annotations', () => {
    expect(parseAnnotations(makeService())).toEqual(defaults());
  });

  it('ignores annotations outside the aws-load-balancer- prefix', () => {
    expect(
      parse({
        'kubectl.kubernetes.io/last-applied-configuration': '{}',
        'service.beta.kubernetes.io/azure-load-balancer-internal': 'true',
        'service.beta.kubernetes.io/aws-load-balancer': 'no trailing hyphen, not ours',
        'example.com/aws-load-balancer-scheme': 'bogus',
      }),
    ).toEqual(defaults());
  });
});

/** Invalid values for every annotation that validates at parse time. */
const invalidCases: [string, string][] = [
  [aws('scheme'), 'public'],
  [aws('target-node-labels'), 'role'],
  [aws('enable-icmp-for-path-mtu-discovery'), 'true'],
  [aws('target-node-labels'), 'zone=a,zone=b'],
  [aws('subnets'), ' , '],
  [aws('healthcheck-protocol'), 'UDP'],
  [aws('healthcheck-port'), '0'],
  [aws('healthcheck-port'), '65536'],
  [aws('healthcheck-port'), 'http'],
  [aws('healthcheck-path'), 'healthz'],
  [aws('healthcheck-path'), `/${'a'.repeat(1024)}`],
  [aws('healthcheck-interval'), '4'],
  [aws('healthcheck-interval'), '301'],
  [aws('healthcheck-interval'), '10s'],
  [aws('healthcheck-timeout'), '1'],
  [aws('healthcheck-timeout'), '121'],
  [aws('healthcheck-healthy-threshold'), '1'],
  [aws('healthcheck-healthy-threshold'), '11'],
  [aws('healthcheck-unhealthy-threshold'), '1'],
  [aws('healthcheck-unhealthy-threshold'), '-3'],
  [aws('healthcheck-success-codes'), '199'],
  [aws('healthcheck-success-codes'), '600'],
  [aws('healthcheck-success-codes'), '200-'],
  [aws('healthcheck-success-codes'), '399-200'],
  [aws('cross-zone-load-balancing-enabled'), 'yes'],
  [aws('cross-zone-load-balancing-enabled'), 'True'],
  [aws('access-log-enabled'), 'yes'],
  [aws('access-log-s3-bucket-name'), 'My_Bucket'],
  [aws('access-log-s3-bucket-prefix'), 'x/AWSLogs'],
  [aws('attributes'), 'idle_timeout.timeout_seconds=60'],
  [aws('attributes'), 'deletion_protection.enabled=yes'],
  [aws('attributes'), 'dns_record.client_routing_policy=nearest'],
  [aws('attributes'), 'secondary_ips.auto_assigned.per_subnet=8'],
  [aws('attributes'), 'access_logs.s3.bucket=ab'],
  [aws('attributes'), '__proto__=true'],
  [aws('additional-resource-tags'), 'team'],
  [aws('additional-resource-tags'), '=web'],
  [aws('additional-resource-tags'), 'aws:owner=me'],
  [aws('additional-resource-tags'), 'kubernetes.io/cluster/c1=owned'],
  [aws('additional-resource-tags'), 'serverless-service-controller.io/cluster=c2'],
  [aws('additional-resource-tags'), `${'k'.repeat(129)}=v`],
  [aws('additional-resource-tags'), `k=${'v'.repeat(257)}`],
  [aws('target-group-attributes'), 'slow_start.duration_seconds=30'],
  [aws('alpn-policy'), 'HTTP2'],
  [aws('name'), 'internal-shop'],
  [aws('proxy-protocol-per-target-group'), '*'],
  [aws('enable-tcp-udp-listener'), 'on'],
  [aws('target-group-attributes.443'), 'stickiness.type=lb_cookie'],
  [aws('listener-attributes.TCP-80'), 'tcp.idle_timeout.seconds=30'],
  [aws('listener-attributes.TLS-443'), 'tcp.idle_timeout.seconds=600'],
  [aws('listener-attributes.TCP80'), 'tcp.idle_timeout.seconds=600'],
  [aws('target-group-attributes'), 'stickiness.type=lb_cookie'],
  [aws('target-group-attributes'), 'deregistration_delay.timeout_seconds=3601'],
  [aws('target-group-attributes'), 'preserve_client_ip.enabled'],
  [aws('proxy-protocol'), 'true'],
  [aws('ssl-cert'), 'my-certificate'],
  [aws('ssl-cert'), `${acmArn},arn:aws:s3:::bucket/cert`],
  [aws('ssl-ports'), ','],
  [aws('ssl-negotiation-policy'), 'My_Policy'],
  [aws('backend-protocol'), 'https'],
  [aws('eip-allocations'), 'eipalloc-xyz'],
  [aws('eip-allocations'), '52.1.2.3'],
  [aws('private-ipv4-addresses'), '10.0.1.300'],
  [aws('private-ipv4-addresses'), '10.0.1.10,fd00::1'],
  [aws('security-groups'), ''],
  [aws('security-groups'), 'sg-1,sg-2,sg-3,sg-4,sg-5,sg-6'],
  [aws('security-groups'), 'caf\u00e9'],
  [aws('manage-backend-security-group-rules'), 'yes'],
  [aws('security-group-prefix-lists'), 'pl-xyz'],
  [aws('security-group-prefix-lists'), 'sg-0123456789abcdef0'],
  [aws('type'), 'classic'],
  [aws('nlb-target-type'), 'pod'],
  [aws('ip-address-type'), 'dualstack-without-public-ipv4'],
  [aws('ip-address-type'), 'ipv6'],
  [aws('ipv6-addresses'), '10.0.1.10'],
  [aws('ipv6-addresses'), '2600:1f18::1,2600:1f18::/64'],
];

describe('parseAnnotations: invalid values', () => {
  it.each(invalidCases)('%s: %j is a terminal error naming both', (name, value) => {
    const error = parseError({ [name]: value });
    expect(error).toBeInstanceOf(TerminalError);
    expect(error.message).toContain(`annotation ${name}: invalid value ${quoted(value)}`);
  });

  it('has no invalid value for the legacy internal annotation: anything but "false" is internal', () => {
    expect(parse({ [aws('internal')]: 'yes' }).scheme).toBe('internal');
    expect(parse({ [aws('internal')]: 'False' }).scheme).toBe('internal');
  });

  it('leaves the legacy source-ranges annotation to sourceRanges, which names it and the value', () => {
    // parseAnnotations only splits the list: spec.loadBalancerSourceRanges may override it.
    const service = makeService({
      annotations: { [legacySourceRanges]: '10.0.0.0/8,10.0.0.1/33' },
    });
    const options = parseAnnotations(service);
    expect(() => sourceRanges(service, options)).toThrow(TerminalError);
    expect(() => sourceRanges(service, options)).toThrow(
      `annotation ${legacySourceRanges}: "10.0.0.1/33"`,
    );
  });

  it('rejects an unknown aws-load-balancer- annotation', () => {
    const error = parseError({ [aws('connection-idle-timeout')]: '60' });
    expect(error.message).toBe(`annotation ${aws('connection-idle-timeout')} is not supported`);
  });

  it('reports every problem in one error', () => {
    const error = parseError({
      [aws('scheme')]: 'public',
      [aws('healthcheck-interval')]: '1',
      [aws('no-such-option')]: 'x',
      [aws('proxy-protocol')]: '*',
    });
    expect(error.message).toContain(`annotation ${aws('scheme')}: invalid value "public"`);
    expect(error.message).toContain(`annotation ${aws('healthcheck-interval')}: invalid value "1"`);
    expect(error.message).toContain(`annotation ${aws('no-such-option')} is not supported`);
    expect(error.message.split('; ')).toHaveLength(3);
  });
});

describe('scheme and the legacy internal annotation', () => {
  it.each<[string, Record<string, string>, string]>([
    [
      'scheme first',
      { [aws('scheme')]: 'internet-facing', [aws('internal')]: 'true' },
      'internet-facing',
    ],
    [
      'internal first',
      { [aws('internal')]: 'true', [aws('scheme')]: 'internet-facing' },
      'internet-facing',
    ],
    ['scheme first', { [aws('scheme')]: 'internal', [aws('internal')]: 'false' }, 'internal'],
    ['internal first', { [aws('internal')]: 'false', [aws('scheme')]: 'internal' }, 'internal'],
  ])('the scheme annotation wins (%s in the object)', (_order, annotations, expected) => {
    expect(parse(annotations).scheme).toBe(expected);
  });
});

describe('annotation registry (drives the user docs)', () => {
  const allowedMutability: readonly Mutability[] = [
    'in place',
    'replaces the load balancer',
    'replaces target groups (make-before-break)',
    'at creation only',
    'n/a',
  ];

  it('has no duplicate names', () => {
    const names = annotationRegistry.map((definition) => definition.name);
    expect(names.filter((name, i) => names.indexOf(name) !== i)).toEqual([]);
  });

  it.each(annotationRegistry.map((definition) => [definition.name, definition] as const))(
    '%s has a description, values, default and mutability',
    (_name, definition) => {
      expect(definition.description.trim()).not.toBe('');
      expect(definition.values.trim()).not.toBe('');
      expect(definition.default.trim()).not.toBe('');
      expect(allowedMutability).toContain(definition.mutability);
    },
  );

  it('names only aws-load-balancer- annotations, plus the legacy source ranges', () => {
    const others = annotationRegistry
      .map((definition) => definition.name)
      .filter((name) => !name.startsWith(aws('')));
    expect(others).toEqual([legacySourceRanges]);
  });

  // Keep the tables above in step with the registry: a new annotation needs its own rows.
  const untested = (tested: readonly string[]) =>
    annotationRegistry
      .filter(
        (d) => !tested.some((name) => name === d.name || name.startsWith(d.namePrefix ?? '\0')),
      )
      .map((d) => d.name);

  it('every registered annotation has a valid-value row', () => {
    expect(untested(validCases.map(([name]) => name))).toEqual([]);
  });

  it('every registered annotation has an invalid-value row, except the two tested separately', () => {
    expect(untested(invalidCases.map(([name]) => name))).toEqual([
      aws('internal'),
      legacySourceRanges,
    ]);
  });
});

describe('prototype keys in key=value annotations', () => {
  it.each(['hasOwnProperty', 'constructor', '__proto__', 'toString', 'valueOf', 'isPrototypeOf'])(
    'target-group-attributes: %s=x is a terminal error naming the attribute, never a TypeError',
    (key) => {
      const error = parseError({ [aws('target-group-attributes')]: `${key}=x` });
      expect(error.message).toContain(`unsupported attribute "${key}"`);
    },
  );

  it.each(['constructor', '__proto__', 'hasOwnProperty', 'toString'])(
    'additional-resource-tags: %s=x is refused rather than dropped or passed to AWS',
    (key) => {
      const error = parseError({ [aws('additional-resource-tags')]: `team=web,${key}=x` });
      expect(error.message).toContain(`tag key "${key}"`);
    },
  );

  it('keeps parsed attributes and tags in objects without a prototype', () => {
    const options = parse({
      [aws('target-group-attributes')]: 'stickiness.enabled=true',
      [aws('additional-resource-tags')]: 'team=web',
    });
    expect(Object.getPrototypeOf(options.targetGroupAttributes)).toBeNull();
    expect(Object.getPrototypeOf(options.additionalTags)).toBeNull();
    expect(options.additionalTags.constructor).toBeUndefined();
  });
});

describe('reserved tag keys in additional-resource-tags', () => {
  it.each([
    'elbv2.k8s.aws/cluster',
    'service.k8s.aws/stack',
    'service.k8s.aws/resource',
    'ingress.k8s.aws/stack',
    'kubernetes.io/cluster/other-cluster',
    'kubernetes.io/service-name',
    'Kubernetes.io/cluster/c1',
    'KubernetesCluster',
    'serverless-service-controller.io/cluster',
    'Serverless-Service-Controller.io/cluster',
    'SERVERLESS-SERVICE-CONTROLLER.IO/service-uid',
    'aws:cloudformation:stack-name',
    'AWS:owner',
  ])('refuses %s, in any letter case, naming the key', (key) => {
    const error = parseError({ [aws('additional-resource-tags')]: `team=web,${key}=x` });
    expect(error.message).toContain(`tag key "${key}" is reserved`);
  });

  it('accepts ordinary keys that merely contain a reserved word', () => {
    expect(
      parse({ [aws('additional-resource-tags')]: 'my-kubernetes.io/team=a,awsome=b' })
        .additionalTags,
    ).toEqual({ 'my-kubernetes.io/team': 'a', awsome: 'b' });
  });

  it('refuses more tags than fit beside our own within AWS’s 50 per resource', () => {
    const tags = Array.from({ length: 46 }, (_, i) => `t${i}=v`).join(',');
    const error = parseError({ [aws('additional-resource-tags')]: tags });
    expect(error.message).toContain('46 tags, over the 45 that fit');
  });

  it('refuses characters AWS does not allow in tags, naming the key', () => {
    const error = parseError({ [aws('additional-resource-tags')]: 'team=web<script>' });
    expect(error.message).toContain('tag "team" has a value with characters AWS does not allow');
  });

  it('names every reserved key, each cut short', () => {
    const long = `elbv2.k8s.aws/${'k'.repeat(300)}`;
    const error = parseError({
      [aws('additional-resource-tags')]: `aws:a=1,${long}=2`,
    });
    expect(error.message).toContain('tag key "aws:a" is reserved');
    expect(error.message).toContain(`"${long.slice(0, 100)}…" (314 characters) is reserved`);
    expect(error.message.length).toBeLessThan(1000);
  });
});

describe('echoed values are bounded', () => {
  it('does not echo a long bad value whole', () => {
    const value = 'x'.repeat(30_000);
    const error = parseError({ [aws('healthcheck-path')]: value });
    expect(error.message.length).toBeLessThan(500);
    expect(error.message).toContain(`annotation ${aws('healthcheck-path')}: invalid value "xxx`);
    expect(error.message).toContain('(30000 characters)');
  });

  it('names a 200 KB annotation by its size, echoing none of it', () => {
    const error = parseError({ [aws('healthcheck-path')]: 'x'.repeat(200_000) });
    expect(error.message).toBe(
      `annotation ${aws('healthcheck-path')} is 200000 characters, over the limit of 32768`,
    );
  });

  it('refuses an oversized annotation without parsing it', () => {
    const tags = Array.from({ length: 20_000 }, (_, i) => `k${i}=v`).join(',');
    const error = parseError({ [aws('additional-resource-tags')]: tags });
    expect(error.message).toBe(
      `annotation ${aws('additional-resource-tags')} is ${tags.length} characters, over the limit of 32768`,
    );
  });

  it('bounds the message for thousands of unknown annotations', () => {
    const annotations = Object.fromEntries(
      Array.from({ length: 5000 }, (_, i) => [aws(`unknown-${i}`), 'x']),
    );
    expect(parseError(annotations).message.length).toBeLessThan(2000);
  });
});
