import { describe, expect, it } from 'vitest';
import {
  arnPatternMatches,
  listenerCount,
  policyViolations,
  ruleFor,
  servicesAhead,
  servicesViolation,
  tenantPolicyError,
  usesNamespaceLabels,
  type TenantPolicy,
  type TenantRequest,
  type TenantRule,
} from '../../../functions/nlb/model/tenant-policy';
import { defaultClaimPolicy } from '../../../functions/core/claim';
import { TerminalError } from '../../../functions/core/errors';
import {
  labelSelectorMatches,
  wildcardMatches,
  type LabelSelector,
} from '../../../functions/core/namespace-selector';
import type { Service } from '../../../functions/core/objects';

const policy: TenantPolicy = {
  rules: [
    { name: 'platform', namespaces: ['kube-system', 'platform'] },
    { namespaces: ['team-*'], internetFacing: false, maxListeners: 2 },
    { name: 'public', namespaceSelector: { matchLabels: { exposure: 'public' } } },
  ],
  default: { internetFacing: false, certificateArns: [] },
};

describe('ruleFor: first matching rule wins, else the default', () => {
  it.each([
    ['platform', {}, 'platform'],
    ['team-a', {}, 'rules[1]'],
    // team-b also has the public label, but rules[1] comes first.
    ['team-b', { exposure: 'public' }, 'rules[1]'],
    ['shop', { exposure: 'public' }, 'public'],
    ['shop', { exposure: 'private' }, 'default'],
    ['teamless', {}, 'default'],
  ])('namespace %s with labels %j gets %s', (namespace, labels, expected) => {
    const applied = ruleFor(policy, namespace, labels);
    expect(applied?.prefix).toBe(`tenant policy (namespace ${namespace}, rule "${expected}")`);
  });

  it('applies nothing when no rule matches and there is no default', () => {
    expect(ruleFor({ rules: policy.rules }, 'elsewhere', {})).toBeUndefined();
  });

  it('needs both selectors of a rule that gives both', () => {
    const both: TenantPolicy = {
      rules: [{ namespaces: ['team-*'], namespaceSelector: { matchLabels: { tier: 'gold' } } }],
    };
    expect(ruleFor(both, 'team-a', { tier: 'gold' })).toBeDefined();
    expect(ruleFor(both, 'team-a', { tier: 'silver' })).toBeUndefined();
    expect(ruleFor(both, 'other', { tier: 'gold' })).toBeUndefined();
  });

  it('reads namespace labels only when some rule has a selector', () => {
    expect(usesNamespaceLabels(policy)).toBe(true);
    expect(usesNamespaceLabels({ rules: [{ namespaces: ['a'] }], default: {} })).toBe(false);
  });
});

/** Load balancer attributes as the request carries them: every value given for each key. */
const attrs = (values: Record<string, string>): ReadonlyMap<string, readonly string[]> =>
  new Map(Object.entries(values).map(([key, value]) => [key, [value]]));

const request = (overrides: Partial<TenantRequest> = {}): TenantRequest => ({
  namespace: 'team-a',
  scheme: 'internal',
  certificateArns: [],
  listeners: 1,
  ...overrides,
});

describe('policyViolations', () => {
  const acmInAccount = 'arn:aws:acm:*:123456789012:certificate/*';
  const cases: [string, TenantRule, Partial<TenantRequest>, string[]][] = [
    ['nothing restricted', {}, { scheme: 'internet-facing', listeners: 50 }, []],
    [
      'internet-facing refused',
      { internetFacing: false },
      { scheme: 'internet-facing' },
      ['internet-facing load balancers are not allowed (internetFacing: false)'],
    ],
    ['internal allowed when internet-facing is refused', { internetFacing: false }, {}, []],
    [
      'internet-facing allowed explicitly',
      { internetFacing: true },
      { scheme: 'internet-facing' },
      [],
    ],
    ['listeners at the maximum', { maxListeners: 3 }, { listeners: 3 }, []],
    [
      'listeners over the maximum',
      { maxListeners: 3 },
      { listeners: 4 },
      ['4 listeners, more than the 3 allowed (maxListeners)'],
    ],
    [
      'certificate in the allowed account',
      { certificateArns: [acmInAccount] },
      { certificateArns: ['arn:aws:acm:eu-west-1:123456789012:certificate/0f1e'] },
      [],
    ],
    [
      'certificate of another account',
      { certificateArns: [acmInAccount] },
      { certificateArns: ['arn:aws:acm:eu-west-1:999999999999:certificate/0f1e'] },
      [
        'certificate "arn:aws:acm:eu-west-1:999999999999:certificate/0f1e" is not allowed (certificateArns)',
      ],
    ],
    [
      'no certificate allowed at all',
      { certificateArns: [] },
      { certificateArns: ['arn:aws:acm:eu-west-1:123456789012:certificate/0f1e'] },
      [
        'certificate "arn:aws:acm:eu-west-1:123456789012:certificate/0f1e" is not allowed (certificateArns)',
      ],
    ],
    [
      'EIP allowed',
      { eipAllocations: ['eipalloc-0aaa*'] },
      { scheme: 'internet-facing', eipAllocations: ['eipalloc-0aaa1111'] },
      [],
    ],
    [
      'EIP not allowed',
      { eipAllocations: ['eipalloc-0aaa1111'] },
      { scheme: 'internet-facing', eipAllocations: ['eipalloc-0aaa1111', 'eipalloc-0bbb2222'] },
      ['Elastic IP allocation "eipalloc-0bbb2222" is not allowed (eipAllocations)'],
    ],
    // securityGroups is checked on the resolved groups: security-group-admission.test.ts.
    ['security groups are not decided from the annotation', { securityGroups: [] }, {}, []],
    [
      'internal dualstack that lets IPv6 in through an internet gateway counts as internet-facing',
      { internetFacing: false },
      {
        ipAddressType: 'dualstack',
        loadBalancerAttributes: attrs({ 'ipv6.deny_all_igw_traffic': 'false' }),
      },
      [
        'an internal dualstack load balancer with ipv6.deny_all_igw_traffic=false is reachable from the internet over IPv6 through an internet gateway, so it counts as internet-facing, which is not allowed (internetFacing: false)',
      ],
    ],
    [
      'internal dualstack that keeps the internet gateway out (AWS default for internal)',
      { internetFacing: false },
      { ipAddressType: 'dualstack' },
      [],
    ],
    [
      'internal dualstack with the internet gateway denied explicitly',
      { internetFacing: false },
      {
        ipAddressType: 'dualstack',
        loadBalancerAttributes: attrs({ 'ipv6.deny_all_igw_traffic': 'true' }),
      },
      [],
    ],
    [
      'internal dualstack open to the internet gateway where the rule allows internet-facing',
      {},
      {
        ipAddressType: 'dualstack',
        loadBalancerAttributes: attrs({ 'ipv6.deny_all_igw_traffic': 'false' }),
      },
      [],
    ],
    [
      'prefix lists allowed',
      { securityGroupPrefixLists: ['pl-0aaa*'] },
      { securityGroupPrefixLists: ['pl-0aaa1111'] },
      [],
    ],
    [
      'prefix list not allowed',
      { securityGroupPrefixLists: ['pl-0aaa*'] },
      { securityGroupPrefixLists: ['pl-0aaa1111', 'pl-0bbb2222'] },
      ['prefix list "pl-0bbb2222" is not allowed (securityGroupPrefixLists)'],
    ],
    [
      'no prefix list allowed at all',
      { securityGroupPrefixLists: [] },
      { securityGroupPrefixLists: ['pl-0aaa1111'] },
      ['prefix list "pl-0aaa1111" is not allowed (securityGroupPrefixLists)'],
    ],
    [
      'access log bucket and prefix allowed, with the namespace in the patterns',
      {
        accessLogBuckets: ['logs-{namespace}', 'shared-logs'],
        accessLogPrefixes: ['{namespace}/*'],
      },
      {
        loadBalancerAttributes: attrs({
          'access_logs.s3.enabled': 'true',
          'access_logs.s3.bucket': 'logs-team-a',
          'access_logs.s3.prefix': 'team-a/lb',
        }),
      },
      [],
    ],
    [
      "access logs into another namespace's bucket and prefix",
      { accessLogBuckets: ['logs-{namespace}'], accessLogPrefixes: ['{namespace}/*'] },
      {
        loadBalancerAttributes: attrs({
          'access_logs.s3.bucket': 'logs-team-b',
          'access_logs.s3.prefix': 'team-b/lb',
        }),
      },
      [
        'access log bucket "logs-team-b" is not allowed (accessLogBuckets)',
        'access log prefix "team-b/lb" is not allowed (accessLogPrefixes)',
      ],
    ],
    [
      'access logs at the root of the bucket when a prefix is required',
      { accessLogPrefixes: ['{namespace}/*'] },
      { loadBalancerAttributes: attrs({ 'access_logs.s3.bucket': 'shared-logs' }) },
      ['access log prefix "" (none: the root of the bucket) is not allowed (accessLogPrefixes)'],
    ],
    [
      'access logs from a legacy annotation are checked too',
      { accessLogBuckets: [] },
      { loadBalancerAttributes: new Map([['access_logs.s3.bucket', ['logs-a', 'logs-b']]]) },
      [
        'access log bucket "logs-a" is not allowed (accessLogBuckets)',
        'access log bucket "logs-b" is not allowed (accessLogBuckets)',
      ],
    ],
    [
      'custom load balancer name within the namespace',
      { loadBalancerNames: ['{namespace}-*'] },
      { loadBalancerName: 'team-a-web' },
      [],
    ],
    [
      "custom load balancer name in another namespace's space",
      { loadBalancerNames: ['{namespace}-*'] },
      { loadBalancerName: 'team-b-web' },
      ['load balancer name "team-b-web" is not allowed (loadBalancerNames)'],
    ],
    [
      'no custom load balancer name allowed',
      { loadBalancerNames: [] },
      { loadBalancerName: 'payments' },
      ['load balancer name "payments" is not allowed (loadBalancerNames)'],
    ],
    ['derived names are always allowed', { loadBalancerNames: [] }, {}, []],
    [
      'secondary IPs per subnet at the maximum',
      { maxSecondaryIpsPerSubnet: 2 },
      { loadBalancerAttributes: attrs({ 'secondary_ips.auto_assigned.per_subnet': '2' }) },
      [],
    ],
    [
      'secondary IPs per subnet over the maximum',
      { maxSecondaryIpsPerSubnet: 2 },
      { loadBalancerAttributes: attrs({ 'secondary_ips.auto_assigned.per_subnet': '7' }) },
      ['7 secondary IP addresses per subnet, more than the 2 allowed (maxSecondaryIpsPerSubnet)'],
    ],
    [
      'every problem at once',
      { internetFacing: false, maxListeners: 1, eipAllocations: [] },
      { scheme: 'internet-facing', listeners: 2, eipAllocations: ['eipalloc-0aaa1111'] },
      [
        'internet-facing load balancers are not allowed (internetFacing: false)',
        '2 listeners, more than the 1 allowed (maxListeners)',
        'Elastic IP allocation "eipalloc-0aaa1111" is not allowed (eipAllocations)',
      ],
    ],
  ];
  it.each(cases)('%s', (_, rule, overrides, expected) => {
    expect(policyViolations(rule, request(overrides))).toEqual(expected);
  });

  it('shortens a long value a tenant wrote before echoing it', () => {
    const arn = `arn:aws:acm:eu-west-1:999999999999:certificate/${'x'.repeat(5000)}`;
    const [problem] = policyViolations(
      { certificateArns: [] },
      request({ certificateArns: [arn] }),
    );
    expect(problem?.length).toBeLessThan(200);
    expect(problem).toContain(`(${arn.length} characters)`);
  });

  it('names the namespace and the rule in a terminal error', () => {
    const applied = ruleFor(policy, 'team-a', {});
    if (applied === undefined) throw new Error('no rule');
    const error = tenantPolicyError(
      applied,
      policyViolations(applied.rule, request({ scheme: 'internet-facing' })),
    );
    expect(error).toBeInstanceOf(TerminalError);
    expect(error.message).toBe(
      'tenant policy (namespace team-a, rule "rules[1]"): internet-facing load balancers are not allowed (internetFacing: false)',
    );
  });
});

describe('arnPatternMatches: "*" stays within one ARN field', () => {
  it.each([
    [
      'arn:aws:acm:*:123456789012:certificate/*',
      'arn:aws:acm:us-east-1:123456789012:certificate/abc',
      true,
    ],
    [
      'arn:aws:acm:*:123456789012:certificate/*',
      'arn:aws:iam::123456789012:server-certificate/abc',
      false,
    ],
    ['arn:aws:*:*:123456789012:*', 'arn:aws:iam::123456789012:server-certificate/web/abc', true],
    // Another account's ARN that only contains the allowed account further on.
    [
      'arn:aws:acm:*:123456789012:certificate/*',
      'arn:aws:acm:us-east-1:999999999999:certificate/a:123456789012:certificate/b',
      false,
    ],
    [
      'arn:aws:acm:us-east-1:123456789012:certificate/abc',
      'arn:aws:acm:us-east-1:123456789012:certificate/abcd',
      false,
    ],
  ])('%s ~ %s is %s', (pattern, arn, expected) => {
    expect(arnPatternMatches(pattern, arn)).toBe(expected);
  });
});

describe('wildcardMatches', () => {
  it.each([
    ['team-*', 'team-a', true],
    ['team-*', 'team-', true],
    ['team-*', 'teams', false],
    ['*-prod', 'shop-prod', true],
    ['a*b*c', 'axxbyyc', true],
    ['a*b*c', 'axxbyy', false],
    ['exact', 'exact', true],
    ['exact', 'exactly', false],
  ])('%s ~ %s is %s', (pattern, text, expected) => {
    expect(wildcardMatches(pattern, text)).toBe(expected);
  });

  it('stays fast on a pattern and text built to make a backtracking matcher explode', () => {
    const started = performance.now();
    expect(wildcardMatches(`${'a*'.repeat(30)}b`, 'a'.repeat(20_000))).toBe(false);
    expect(performance.now() - started).toBeLessThan(2000);
  });
});

describe('labelSelectorMatches', () => {
  const labels = { team: 'a', tier: 'gold' };
  it.each<[LabelSelector, boolean]>([
    [{ matchLabels: { team: 'a' } }, true],
    [{ matchLabels: { team: 'b' } }, false],
    [{ matchExpressions: [{ key: 'tier', operator: 'In', values: ['gold', 'silver'] }] }, true],
    [{ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['gold'] }] }, false],
    [{ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['x'] }] }, true],
    [{ matchExpressions: [{ key: 'team', operator: 'Exists' }] }, true],
    [{ matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] }, false],
    [{ matchExpressions: [{ key: 'constructor', operator: 'Exists' }] }, false],
    [
      { matchLabels: { team: 'a' }, matchExpressions: [{ key: 'zone', operator: 'Exists' }] },
      false,
    ],
  ])('%j is %s', (selector, expected) => {
    expect(labelSelectorMatches(selector, labels)).toBe(expected);
  });
});

describe('maxLoadBalancerServices: who comes first', () => {
  const lb = (name: string, created: string, extra: Partial<Service> = {}): Service => ({
    metadata: { name, namespace: 'team-a', uid: `uid-${name}`, creationTimestamp: created },
    spec: {
      type: 'LoadBalancer',
      loadBalancerClass: defaultClaimPolicy.loadBalancerClass,
      ports: [{ port: 80 }],
    },
    ...extra,
  });
  const served = { status: { loadBalancer: { ingress: [{ hostname: 'x.elb.amazonaws.com' }] } } };
  const a = lb('a', '2026-01-01T00:00:00Z', served);
  const b = lb('b', '2026-01-01T00:00:01Z');
  const c = lb('c', '2026-01-01T00:00:02Z');
  const notOurs = lb('other-class', '2025-01-01T00:00:00Z', {
    spec: { type: 'LoadBalancer', loadBalancerClass: 'example.com/elsewhere' },
  });
  const clusterIp = { ...lb('cluster-ip', '2025-01-01T00:00:00Z'), spec: { type: 'ClusterIP' } };
  const leaving = lb('leaving', '2025-01-01T00:00:00Z', {
    metadata: {
      name: 'leaving',
      uid: 'uid-leaving',
      creationTimestamp: '2025-01-01T00:00:00Z',
      deletionTimestamp: '2026-02-01T00:00:00Z',
    },
  });
  const all = [a, b, c, notOurs, clusterIp, leaving];

  it('counts served Services and older ones, not other classes, other types or Services being deleted', () => {
    expect(servicesAhead(a, all, defaultClaimPolicy)).toBe(0);
    expect(servicesAhead(b, all, defaultClaimPolicy)).toBe(1);
    expect(servicesAhead(c, all, defaultClaimPolicy)).toBe(2);
  });

  it('counts every load balancer deletion protection keeps: converted or being deleted, whatever its age, and those only the state table still lists', () => {
    const finalizer = { finalizers: ['serverless-service-controller.io/load-balancer-cleanup'] };
    const protection = {
      annotations: {
        'service.beta.kubernetes.io/aws-load-balancer-attributes':
          'deletion_protection.enabled=true',
      },
    };
    const converted: Service = {
      metadata: {
        name: 'converted',
        namespace: 'team-a',
        uid: 'uid-converted',
        creationTimestamp: '2027-01-01T00:00:00Z',
        ...finalizer,
        ...protection,
      },
      spec: { type: 'ClusterIP' },
    };
    const protectedLeaving = lb('protected', '2027-01-01T00:00:00Z', {
      metadata: {
        name: 'protected',
        namespace: 'team-a',
        uid: 'uid-protected',
        creationTimestamp: '2027-01-01T00:00:00Z',
        deletionTimestamp: '2027-02-01T00:00:00Z',
        ...finalizer,
        ...protection,
      },
    });
    // Younger than b and not served: only the load balancer they keep puts them ahead.
    expect(servicesAhead(b, [b, converted], defaultClaimPolicy)).toBe(1);
    expect(servicesAhead(b, [b, protectedLeaving], defaultClaimPolicy)).toBe(1);
    expect(servicesAhead(b, [a, b, c, converted, protectedLeaving], defaultClaimPolicy)).toBe(3);
    // Another controller's finalizer on a ClusterIP Service holds nothing of ours.
    const foreign: Service = {
      ...converted,
      metadata: { ...converted.metadata, uid: 'uid-foreign', finalizers: ['example.com/other'] },
    };
    expect(servicesAhead(b, [b, foreign], defaultClaimPolicy)).toBe(0);
    // Kept NLBs the state table lists count once, whether their Service is listed, gone, or had
    // our finalizer stripped (finding 2's bypass).
    const stripped: Service = {
      ...converted,
      metadata: { ...converted.metadata, finalizers: [] },
    };
    expect(servicesAhead(b, [b, stripped], defaultClaimPolicy)).toBe(0);
    expect(servicesAhead(b, [b, stripped], defaultClaimPolicy, ['team-a/converted'])).toBe(1);
    expect(servicesAhead(b, [b], defaultClaimPolicy, ['team-a/gone', 'team-a/converted'])).toBe(2);
    expect(servicesAhead(b, [b, converted], defaultClaimPolicy, ['team-a/converted'])).toBe(1);
  });

  it('does not count a Service whose load balancer is being deleted without protection, so its replacement is admitted', () => {
    const leaving = lb('web', '2027-01-01T00:00:00Z', {
      metadata: {
        name: 'web',
        namespace: 'team-a',
        uid: 'uid-old-web',
        creationTimestamp: '2025-01-01T00:00:00Z',
        deletionTimestamp: '2027-02-01T00:00:00Z',
        finalizers: ['serverless-service-controller.io/load-balancer-cleanup'],
      },
      ...served,
    });
    expect(servicesAhead(b, [b, leaving], defaultClaimPolicy)).toBe(0);
  });

  it('puts a served Service ahead even when it is younger, so a tie in time cannot admit one too many', () => {
    const youngServed = lb('z', '2026-01-01T00:00:05Z', served);
    expect(servicesAhead(b, [b, youngServed], defaultClaimPolicy)).toBe(1);
  });

  it('admits exactly the allowed number of a burst, in whatever order they sync', () => {
    const burst = Array.from({ length: 10 }, (_, i) => lb(`s${i}`, '2026-01-01T00:00:00Z'));
    const admitted = [...burst]
      .reverse()
      .filter(
        (s) =>
          servicesViolation(
            { maxLoadBalancerServices: 3 },
            servicesAhead(s, burst, defaultClaimPolicy),
            'team-a',
          ) === undefined,
      );
    expect(admitted.map((s) => s.metadata?.name).sort()).toEqual(['s0', 's1', 's2']);
  });

  it('orders a Date from client-node like the string the API server sent', () => {
    const asDate = lb('d', '2026-01-01T00:00:01Z', {});
    const withDate: Service = {
      ...asDate,
      metadata: { ...asDate.metadata, creationTimestamp: new Date('2026-01-01T00:00:01Z') },
    };
    expect(servicesAhead(withDate, [a, b, c], defaultClaimPolicy)).toBe(2);
  });

  it('words the violation with the limit', () => {
    expect(servicesViolation({ maxLoadBalancerServices: 2 }, 2, 'team-a')).toBe(
      'namespace team-a already has 2 LoadBalancer Services, the most allowed (maxLoadBalancerServices: 2)',
    );
    expect(servicesViolation({ maxLoadBalancerServices: 2 }, 1, 'team-a')).toBeUndefined();
    expect(servicesViolation({}, 1000, 'team-a')).toBeUndefined();
  });

  it('says plainly that a maximum of 0 allows no LoadBalancer Service at all', () => {
    expect(servicesViolation({ maxLoadBalancerServices: 0 }, 0, 'team-a')).toBe(
      'LoadBalancer Services are not allowed in namespace team-a (maxLoadBalancerServices: 0)',
    );
  });
});

describe('listenerCount', () => {
  it('counts TCP and UDP on one port as one listener', () => {
    const service: Service = {
      spec: {
        ports: [
          { port: 53, protocol: 'TCP' },
          { port: 53, protocol: 'UDP' },
          { port: 80, protocol: 'TCP' },
        ],
      },
    };
    expect(listenerCount(service)).toBe(2);
  });
});
