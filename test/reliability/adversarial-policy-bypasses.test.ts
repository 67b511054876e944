import { PatchStrategy, setHeaderOptions, type V1Service } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { annotated, awsAnnotation, loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { recordPending, recordScenario } from './support/summary';
import { createLoadBalancerServices, drainAll, endStateProblems } from './support/world';

/**
 * Issue 32, findings 2, 3, 4 and 6: ways around the tenant policy. Each attacker Service gets a
 * Warning naming the restriction and owns nothing in AWS; a Service in another namespace converges.
 */
let world: RuntimeWorld;

afterEach(async () => {
  await world.stop();
});

const aws = awsAnnotation;

const tenantPolicy = {
  rules: [
    { name: 'platform', namespaces: ['default'] },
    {
      name: 'tenants',
      namespaces: ['team-*'],
      internetFacing: false,
      maxLoadBalancerServices: 1,
      securityGroupPrefixLists: ['pl-0aaa*'],
      accessLogBuckets: ['logs-{namespace}'],
      accessLogPrefixes: ['{namespace}', '{namespace}/*'],
      loadBalancerNames: ['{namespace}-*'],
      maxSecondaryIpsPerSubnet: 1,
    },
  ],
  // Every namespace no rule matches: no LoadBalancer Service at all (finding 4).
  default: { maxLoadBalancerServices: 0 },
};

interface Attack {
  readonly finding: string;
  readonly namespace: string;
  readonly change: (s: V1Service) => V1Service;
  readonly says: RegExp;
}

const attacks: Record<string, Attack> = {
  'igw-open': {
    finding: '3',
    namespace: 'team-a',
    change: annotated({
      [aws('scheme')]: 'internal',
      [aws('ip-address-type')]: 'dualstack',
      [aws('attributes')]: 'ipv6.deny_all_igw_traffic=false',
    }),
    says: /rule "tenants"\): an internal dualstack load balancer with ipv6\.deny_all_igw_traffic=false is reachable from the internet over IPv6 .*\(internetFacing: false\)/,
  },
  'unmatched-namespace': {
    finding: '4',
    namespace: 'sandbox',
    change: (s) => s,
    says: /rule "default"\): LoadBalancer Services are not allowed in namespace sandbox \(maxLoadBalancerServices: 0\)/,
  },
  'foreign-prefix-list': {
    finding: '6',
    namespace: 'team-a',
    change: annotated({ [aws('security-group-prefix-lists')]: 'pl-0bbb2222' }),
    says: /prefix list "pl-0bbb2222" is not allowed \(securityGroupPrefixLists\)/,
  },
  'foreign-log-bucket': {
    finding: '6',
    namespace: 'team-a',
    change: annotated({
      [aws('attributes')]:
        'access_logs.s3.enabled=true,access_logs.s3.bucket=logs-team-b,access_logs.s3.prefix=team-a',
    }),
    says: /access log bucket "logs-team-b" is not allowed \(accessLogBuckets\)/,
  },
  'foreign-log-prefix': {
    finding: '6',
    namespace: 'team-a',
    change: annotated({
      [aws('access-log-enabled')]: 'true',
      [aws('access-log-s3-bucket-name')]: 'logs-team-a',
      [aws('access-log-s3-bucket-prefix')]: 'team-b/lb',
    }),
    says: /access log prefix "team-b\/lb" is not allowed \(accessLogPrefixes\)/,
  },
  'squatted-name': {
    finding: '6',
    namespace: 'team-a',
    change: annotated({ [aws('name')]: 'team-b-payments' }),
    says: /load balancer name "team-b-payments" is not allowed \(loadBalancerNames\)/,
  },
  'many-secondary-ips': {
    finding: '6',
    namespace: 'team-a',
    change: annotated({ [aws('attributes')]: 'secondary_ips.auto_assigned.per_subnet=7' }),
    says: /7 secondary IP addresses per subnet, more than the 1 allowed \(maxSecondaryIpsPerSubnet\)/,
  },
  // Finding 2: team-k's load balancer kept by deletion protection after a type change still
  // fills its one place, so a second Service is refused.
  'after-kept': {
    finding: '2',
    namespace: 'team-k',
    change: (s) => s,
    says: /namespace team-k already has 1 LoadBalancer Services, the most allowed \(maxLoadBalancerServices: 1\)/,
  },
};

async function create(namespace: string, name: string, change: (s: V1Service) => V1Service) {
  await world.api.createNamespacedService({
    namespace,
    body: change(loadBalancerService(name, namespace)),
  });
  await world.send({ v: 1, kind: 'service', key: `${namespace}/${name}` });
}

it('tenant policy bypasses: kept NLBs, internal dualstack open to the internet gateway, unmatched namespaces, prefix lists, access logs, names and secondary IPs are refused, while a Service in another namespace converges', async () => {
  const runs = Object.keys(attacks).length + 1;
  recordPending(
    'adversarial: tenant policy bypasses',
    runs,
    'a Service for each way around the tenant policy of issue 32 (findings 2, 3, 4, 6) and a good Service in another namespace',
  );
  world = await createRuntimeWorld({ tenantPolicy, backoffBaseSeconds: 1, backoffMaxSeconds: 4 });

  // Finding 2's set-up: a protected NLB, then the Service turns ClusterIP and the NLB is kept.
  await create(
    'team-k',
    'kept',
    annotated({ [aws('attributes')]: 'deletion_protection.enabled=true' }),
  );
  expect(await drainAll(world)).toBe(true);
  await world.api.patchNamespacedService(
    { name: 'kept', namespace: 'team-k', body: { spec: { type: 'ClusterIP' } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  await world.send({ v: 1, kind: 'service', key: 'team-k/kept' });
  expect(await drainAll(world)).toBe(true);

  for (const [name, { namespace, change }] of Object.entries(attacks))
    await create(namespace, name, change);
  await createLoadBalancerServices(world, ['good']);
  const drained = await drainAll(world);

  const problems: string[] = [];
  let answered = 0;
  const warningsOf = async (namespace: string, name: string) =>
    (await world.api.listNamespacedEvent({ namespace })).items
      .filter((e) => e.involvedObject.name === name && e.type === 'Warning')
      .map((e) => e.message ?? '');
  for (const [name, { namespace, says, finding }] of Object.entries(attacks)) {
    const found = await warningsOf(namespace, name);
    if (found.some((message) => says.test(message))) answered++;
    else
      problems.push(
        `finding ${finding}, ${namespace}/${name}: no Warning matching ${String(says)} in ${JSON.stringify(found)}`,
      );
  }
  const kept = await warningsOf('team-k', 'kept');
  if (!kept.some((m) => m.includes('deletion_protection.enabled=true, so load balancer')))
    problems.push(`team-k/kept: the kept NLB was not reported: ${JSON.stringify(kept)}`);

  const owners = new Set(
    (await world.aws.ownedResources()).map((line) => /\((.*)\)$/.exec(line)?.[1] ?? line),
  );
  // The kept NLB is team-k/kept's by design (deletion protection); no attacker owns anything.
  const expectedOwners = ['default/good', 'team-k/kept'];
  const extra = [...owners].filter((key) => !expectedOwners.includes(key));
  if (extra.length > 0) problems.push(`refused Services own AWS resources: ${extra.join(', ')}`);
  if (!owners.has('team-k/kept')) problems.push('the protected NLB of team-k/kept is gone');
  // The end-state check knows the default namespace only: team-k's kept NLB shows as unowned there.
  const end = await endStateProblems(world, { good: [80, 443] });
  const notGood = end.problems.filter((p) => !p.startsWith('not owned by any live Service'));
  recordScenario({
    scenario: 'adversarial: tenant policy bypasses',
    runs,
    converged: answered + end.converged,
    leaked: extra.length,
    lost: runs - answered - end.converged,
    how: `${Object.keys(attacks).length} attacker Services: a second Service beside an NLB that deletion protection keeps after a type change (maxLoadBalancerServices 1), internal dualstack with ipv6.deny_all_igw_traffic=false under internetFacing: false, a namespace no rule matches under a deny default (maxLoadBalancerServices 0), another prefix list, another namespace's log bucket and prefix (attributes and legacy annotations), another namespace's NLB name, 7 secondary IPs over 1: each refused with a Warning naming the restriction, none owns anything in AWS; a Service in another namespace converges`,
  });
  expect(drained).toBe(true);
  expect(problems).toEqual([]);
  expect(notGood).toEqual([]);
  expect(end.converged).toBe(1);
});
