import {
  DescribeTagsCommand,
  ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { V1Service, V1ServicePort } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { readNlbState } from '../../functions/nlb/nlb-state';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { inventory } from './support/inventory';
import { recordPending, recordScenario, type ScenarioResult } from './support/summary';
import { drainAll } from './support/world';

/**
 * Services one tenant can write that must hurt only themselves (issue 19, findings 3–5): each gets
 * one Warning saying what is wrong, nothing of it is created in AWS, nothing is retried hot, and a
 * good Service in another namespace converges beside them. The fake API server lets them all in,
 * as a real one does (it checks neither annotation contents nor list sizes this small).
 */

let world: RuntimeWorld;

afterEach(async () => {
  await world.stop();
});

const tenant = 'tenant-a';
const neighbour = 'tenant-b';
const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;

interface BadService {
  readonly change: (s: V1Service) => V1Service;
  /** What the Warning must say. */
  readonly says: RegExp;
}

const withAnnotations =
  (annotations: Record<string, string>) =>
  (s: V1Service): V1Service => ({ ...s, metadata: { ...s.metadata, annotations } });
const withSpec =
  (spec: Partial<NonNullable<V1Service['spec']>>) =>
  (s: V1Service): V1Service => ({ ...s, spec: { ...s.spec, ...spec } });

/** 50 port numbers, each TCP and UDP on one nodePort: 50 TCP_UDP listeners, the NLB maximum. */
const tcpUdpPorts: V1ServicePort[] = Array.from({ length: 50 }, (_, i) => [
  { name: `t${i}`, protocol: 'TCP', port: 1000 + i, targetPort: 1000 + i, nodePort: 31000 + i },
  { name: `u${i}`, protocol: 'UDP', port: 1000 + i, targetPort: 1000 + i, nodePort: 31000 + i },
]).flat();
const ranges = (count: number) =>
  Array.from({ length: count }, (_, i) => `10.${Math.floor(i / 256) % 256}.${i % 256}.0/24`);
const tags = (count: number) => Array.from({ length: count }, (_, i) => `t${i}=v`).join(',');

/**
 * Runs one catalogue: the bad Services in one namespace, a good one in another; returns the
 * scenario's counts and every problem found.
 */
async function runCatalogue(
  scenario: ScenarioResult['scenario'],
  bad: Readonly<Record<string, BadService>>,
  how: string,
  good: (s: V1Service) => V1Service = (s) => s,
): Promise<{ problems: string[]; good: { dnsName: string; loadBalancerArn: string } }> {
  const runs = Object.keys(bad).length + 1;
  recordPending(scenario, runs, how);
  world = await createRuntimeWorld({ backoffBaseSeconds: 1, backoffMaxSeconds: 4 });
  const started = Date.now();
  for (const [name, { change }] of Object.entries(bad)) {
    await world.api.createNamespacedService({
      namespace: tenant,
      body: change(loadBalancerService(name, tenant)),
    });
    await world.send({ v: 1, kind: 'service', key: `${tenant}/${name}` });
  }
  await world.api.createNamespacedService({
    namespace: neighbour,
    body: good(loadBalancerService('good', neighbour)),
  });
  await world.send({ v: 1, kind: 'service', key: `${neighbour}/good` });
  const drained = await drainAll(world);
  const seconds = Math.round((Date.now() - started) / 1000);

  const problems: string[] = [];
  if (!drained) problems.push('the queue never drained: something is retried for ever');
  const events = (await world.api.listNamespacedEvent({ namespace: tenant })).items;
  let answered = 0;
  for (const [name, { says }] of Object.entries(bad)) {
    const warnings = events.filter(
      (e) =>
        e.involvedObject.name === name &&
        e.type === 'Warning' &&
        e.reason === 'SyncLoadBalancerFailed',
    );
    const mine: string[] = [];
    if (!warnings.some((e) => says.test(e.message ?? '')))
      mine.push(
        `no Warning matching ${String(says)} (got ${warnings.map((e) => e.message?.slice(0, 200)).join(' | ')})`,
      );
    // Terminal: warned once, not once per retry.
    if (warnings.some((e) => (e.count ?? 1) > 1)) mine.push('warned more than once');
    // What the user gets back stays short, whatever the Service holds.
    if (warnings.some((e) => (e.message ?? '').length > 2000))
      mine.push('a Warning longer than 2000 characters');
    if (mine.length === 0) answered++;
    else problems.push(`${name}: ${mine.join('; ')}`);
  }
  const longLines = world.log.lines.filter((l) => JSON.stringify(l).length > 20_000);
  if (longLines.length > 0) problems.push(`${longLines.length} log lines over 20,000 characters`);

  // The good Service: its NLB with both listeners, every node a target, a checkpoint.
  const record = await world.runtime.store.getService(`${neighbour}/good`);
  const state = readNlbState(record?.provider);
  const found = await inventory(world.aws);
  const lb = found.loadBalancers.find((l) => l.dnsName === state.dnsName);
  const owned = new Set<string>([
    ...(lb ? [lb.dnsName] : []),
    ...Object.values(state.targetGroups ?? {}).map((tg) => tg.arn),
    ...(state.securityGroupId ? [state.securityGroupId] : []),
  ]);
  const instances = world.aws.hosts.map((h) => h.instanceId).sort();
  const listenerPorts = (lb?.listeners ?? []).map((l) => Number(/:(\d+)->/.exec(l)?.[1])).sort();
  const goodProblems: string[] = [];
  if (lb === undefined) goodProblems.push('no NLB');
  if (JSON.stringify(listenerPorts) !== JSON.stringify([443, 80]))
    goodProblems.push(`listeners on ${listenerPorts.join(',')}`);
  for (const tg of found.targetGroups.filter((t) => owned.has(t.name))) {
    if (JSON.stringify(tg.targets) !== JSON.stringify(instances))
      goodProblems.push(`targets ${tg.targets.join(',')}`);
  }
  if (record?.checkpoint === undefined) goodProblems.push('no checkpoint');
  if (goodProblems.length > 0) problems.push(`${neighbour}/good: ${goodProblems.join('; ')}`);

  // Nothing else in the account: the bad Services created nothing.
  const leftovers = [
    ...found.loadBalancers.filter((l) => !owned.has(l.dnsName)).map((l) => l.name),
    ...found.targetGroups.filter((t) => !owned.has(t.name)).map((t) => t.name),
    ...found.securityGroups.filter((id) => !owned.has(id)),
  ];
  if (leftovers.length > 0) problems.push(`created for a bad Service: ${leftovers.join(', ')}`);

  const converged = answered + (goodProblems.length === 0 ? 1 : 0);
  recordScenario({
    scenario,
    runs,
    converged,
    leaked: leftovers.length,
    lost: runs - converged,
    how: `${how}; each with one Warning naming the problem, nothing created in AWS, and a Service in another namespace converged beside them (${seconds} s)`,
  });
  return {
    problems,
    good: { dnsName: state.dnsName ?? '', loadBalancerArn: state.loadBalancerArn ?? '' },
  };
}

it('work before limits: oversized Services are refused from their counts, with short Warnings, and another namespace converges', async () => {
  const bad: Record<string, BadService> = {
    // 25,000 ranges × 50 TCP_UDP listeners would be 2.5 million rules if they were built.
    'ranges-times-listeners': {
      change: withSpec({ ports: tcpUdpPorts, loadBalancerSourceRanges: ranges(25_000) }),
      says: /: spec\.loadBalancerSourceRanges has 25000 entries, over the limit of 1000$/,
    },
    'legacy-ranges': {
      change: withAnnotations({
        'service.beta.kubernetes.io/load-balancer-source-ranges': ranges(1001).join(','),
      }),
      says: /load-balancer-source-ranges has 1001 entries, over the limit of 1000/,
    },
    'many-ports': {
      change: withSpec({
        ports: Array.from({ length: 101 }, (_, i) => ({
          name: `p${i}`,
          protocol: 'TCP',
          port: 2000 + i,
          targetPort: 2000 + i,
        })),
      }),
      says: /: spec\.ports has 101 entries, over the limit of 100$/,
    },
    'annotation-200kb': {
      change: withAnnotations({ [aws('healthcheck-path')]: `/${'x'.repeat(200_000)}` }),
      says: /aws-load-balancer-healthcheck-path is 200001 characters, over the limit of 32768$/,
    },
    'annotations-together': {
      change: withAnnotations({
        [aws('healthcheck-path')]: `/${'a'.repeat(30_000)}`,
        [aws('ssl-negotiation-policy')]: 'b'.repeat(30_000),
        [aws('subnets')]: 'c'.repeat(30_000),
      }),
      says: /service\.beta\.kubernetes\.io\/ annotations hold \d+ characters, over the limit of 65536/,
    },
    'long-bad-value': {
      change: withAnnotations({ [aws('scheme')]: 'y'.repeat(30_000) }),
      says: /aws-load-balancer-scheme: invalid value "y{100}…" \(30000 characters\): must be/,
    },
  };
  const { problems } = await runCatalogue(
    'adversarial: work before limits',
    bad,
    `${Object.keys(bad).length} oversized Services in one namespace (25,000 ranges on 50 TCP_UDP listeners, 1,001 legacy ranges, 101 ports, a 200 KB annotation, 90 KB of annotations, a 30 KB bad value)`,
  );
  expect(problems).toEqual([]);
}, 240_000);

it('prototype keys in annotations: a terminal Warning each, no TypeError, no half-done sync, and another namespace converges', async () => {
  const attributes = (value: string) =>
    withAnnotations({ [aws('target-group-attributes')]: value });
  const extraTags = (value: string) =>
    withAnnotations({ [aws('additional-resource-tags')]: value });
  const bad: Record<string, BadService> = {
    'tg-has-own-property': {
      change: attributes('hasOwnProperty=x'),
      says: /unsupported attribute "hasOwnProperty"/,
    },
    'tg-constructor': {
      change: attributes('stickiness.enabled=true,constructor=x'),
      says: /unsupported attribute "constructor"/,
    },
    'tg-proto': { change: attributes('__proto__=x'), says: /unsupported attribute "__proto__"/ },
    'tg-to-string': { change: attributes('toString=1'), says: /unsupported attribute "toString"/ },
    'tags-constructor': {
      change: extraTags('team=a,constructor=x'),
      says: /tag key "constructor" is not allowed/,
    },
    'tags-proto': { change: extraTags('__proto__=x'), says: /tag key "__proto__" is not allowed/ },
  };
  const { problems } = await runCatalogue(
    'adversarial: prototype keys in annotations',
    bad,
    `${Object.keys(bad).length} Services with Object.prototype names as target-group-attributes keys (\`hasOwnProperty\`, \`constructor\`, \`__proto__\`, \`toString\`) and as additional-resource-tags keys (\`constructor\`, \`__proto__\`)`,
  );
  expect(problems).toEqual([]);
}, 240_000);

it('reserved tag keys: other controllers’ and our ownership keys are refused in any case, and another namespace keeps its own tags', async () => {
  const extraTags = (value: string) =>
    withAnnotations({ [aws('additional-resource-tags')]: value });
  const reserved = (key: string) => ({
    change: extraTags(`team=a,${key}=x`),
    says: new RegExp(`tag key "${key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}" is reserved`),
  });
  const bad: Record<string, BadService> = {
    'alb-controller-cluster': reserved('elbv2.k8s.aws/cluster'),
    'alb-controller-stack': reserved('service.k8s.aws/stack'),
    'kubernetes-cluster': reserved('kubernetes.io/cluster/other-cluster'),
    'ours-other-case': reserved('Serverless-Service-Controller.io/cluster'),
    'ours-service-uid': reserved('serverless-service-controller.io/service-uid'),
    'legacy-cluster': reserved('KubernetesCluster'),
    'aws-prefix': reserved('aws:cloudformation:stack-name'),
    'too-many-tags': { change: extraTags(tags(46)), says: /46 tags, over the 45 that fit/ },
    'long-key': {
      change: extraTags(`${'k'.repeat(129)}=v`),
      says: /tag "k{100}…" \(129 characters\) is too long/,
    },
    'bad-characters': {
      change: extraTags('team=<script>'),
      says: /tag "team" has a value with characters AWS does not allow/,
    },
  };
  const { problems, good } = await runCatalogue(
    'adversarial: reserved tag keys',
    bad,
    `${Object.keys(bad).length} Services whose additional-resource-tags take ownership keys (elbv2.k8s.aws/, service.k8s.aws/, kubernetes.io/, ours in another letter case, KubernetesCluster, aws:) or break AWS's tag limits (46 tags, a 129-character key, a "<" in a value); the good Service has tags of its own`,
    withAnnotations({ [aws('additional-resource-tags')]: 'team=b,cost-center=42' }),
  );
  expect(problems).toEqual([]);
  const described = await world.aws.account
    .client(ElasticLoadBalancingV2Client)
    .send(new DescribeTagsCommand({ ResourceArns: [good.loadBalancerArn] }));
  const onGood = new Map(
    (described.TagDescriptions?.[0]?.Tags ?? []).map((t) => [t.Key ?? '', t.Value ?? '']),
  );
  expect([onGood.get('team'), onGood.get('cost-center')]).toEqual(['b', '42']);
}, 240_000);
