import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  DescribeTargetHealthCommand,
  ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import {
  GetResourcesCommand,
  ResourceGroupsTaggingAPIClient,
} from '@aws-sdk/client-resource-groups-tagging-api';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ownershipTags } from '../../functions/nlb/model/naming';
import { upstreamFinalizer } from '../../functions/core/claim';
import { createSimulatedNetwork, type SimulatedNetwork } from '../../functions/local/aws-resources';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import { AwsFaultProxy } from '../support/aws-fault-proxy';
import {
  cli,
  cliArgs,
  eventually,
  outputShows,
  startProcess as start,
} from '../support/cli-process';

/**
 * The CLI as users run it, in child processes: `npm start` on the embedded default, and real mode
 * against a separately started fake API server and the test run's moto. The CLI's own AWS clients
 * carry no moto account header, so these tests live in moto's default account and keep apart by
 * cluster, queue and table names.
 */
const endpoint = inject('awsEndpoint');
const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
const aws = { region: 'us-east-1', endpoint, credentials };
const awsEnv = {
  AWS_ENDPOINT_URL: endpoint,
  AWS_ACCESS_KEY_ID: 'local',
  AWS_SECRET_ACCESS_KEY: 'local',
  AWS_REGION: 'us-east-1',
};

const elbv2 = new ElasticLoadBalancingV2Client(aws);
const tagging = new ResourceGroupsTaggingAPIClient(aws);

/** What the emulator holds for a cluster: `resource (namespace/name)` lines, plus target group ARNs. */
async function inventory(clusterName: string) {
  const found = await tagging.send(
    new GetResourcesCommand({
      TagFilters: [{ Key: ownershipTags.cluster, Values: [clusterName] }],
    }),
  );
  const mappings = found.ResourceTagMappingList ?? [];
  const tag = (tags: { Key?: string; Value?: string }[] | undefined, key: string) =>
    tags?.find((t) => t.Key === key)?.Value ?? '?';
  return {
    resources: mappings
      .map((m) => `${tag(m.Tags, ownershipTags.resource)} (${tag(m.Tags, ownershipTags.service)})`)
      .sort(),
    targetGroupArns: mappings
      .map((m) => m.ResourceARN ?? '')
      .filter((arn) => arn.includes(':targetgroup/')),
  };
}

async function registeredTargets(clusterName: string): Promise<string[]> {
  const { targetGroupArns } = await inventory(clusterName);
  const targets = new Set<string>();
  for (const arn of targetGroupArns) {
    const health = await elbv2.send(new DescribeTargetHealthCommand({ TargetGroupArn: arn }));
    for (const d of health.TargetHealthDescriptions ?? []) targets.add(d.Target?.Id ?? '');
  }
  return [...targets].sort();
}

describe('npm start (embedded default)', () => {
  it('npm start -- --until-converged exits 0 once the sample Service has its NLB, targets and status', async () => {
    const run = start('npm', ['start', '--', '--until-converged', '--timeout', '120'], {
      AWS_ENDPOINT_URL: '',
    });
    const code = await run.closed;
    expect(code, run.output()).toBe(0);
    expect(run.output()).toMatch(
      /default\/hello +ready +3 +k8s-default-hello-\S+\.elb\.amazonaws\.com/,
    );
    expect(run.output()).toContain('Converged');
  }, 150_000);

  it('against a running emulator: the NLB it reports is in the emulator with the three nodes as targets', async () => {
    const clusterName = `embedded-${Date.now().toString(36)}`;
    const result = await cli(['--until-converged', '--timeout', '120'], {
      ...awsEnv,
      SSC_CLUSTER_NAME: clusterName,
      SSC_QUEUE_NAME: `${clusterName}-work`,
      SSC_TABLE_NAME: `${clusterName}-state`,
    });
    expect(result.code, result.output).toBe(0);
    const hostname = /default\/hello +ready +3 +(\S+)/.exec(result.output)?.[1] ?? '';
    const lbs = await elbv2.send(new DescribeLoadBalancersCommand({}));
    expect(lbs.LoadBalancers?.map((lb) => lb.DNSName)).toContain(hostname);
    expect((await inventory(clusterName)).resources).toContain('load-balancer (default/hello)');
    expect(await registeredTargets(clusterName)).toHaveLength(3);
  }, 150_000);

  it('with --rbac: the functions and the forwarder run under the RBAC of infra/k8s, the commands as the admin', async () => {
    const clusterName = `rbac-${Date.now().toString(36)}`;
    const run = start(process.execPath, [...cliArgs, '--rbac'], {
      ...awsEnv,
      SSC_CLUSTER_NAME: clusterName,
      SSC_QUEUE_NAME: `${clusterName}-work`,
      SSC_TABLE_NAME: `${clusterName}-state`,
    });
    const shows = (pattern: RegExp, what: string) => outputShows(run, pattern, what);
    try {
      await shows(/default\/hello +ready +3 /, 'the sample Service ready');
      expect(run.output()).toContain(
        'the forwarder as system:serviceaccount:serverless-service-controller:forwarder',
      );
      const kubeconfig = /kubectl --kubeconfig (\S+)/.exec(run.output())?.[1] ?? '';
      const file = join(mkdtempSync(join(tmpdir(), 'cli-rbac-')), 'second.json');
      writeFileSync(
        file,
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: 'second', namespace: 'default' },
          spec: {
            type: 'LoadBalancer',
            loadBalancerClass: 'serverless-service-controller.io/nlb',
            ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
          },
        }),
      );
      const applied = await cli(['apply', '-f', file, '--kubeconfig', kubeconfig]);
      expect(applied.output).toContain('service/default/second created');
      const added = await cli(['node', 'add', '1', '--kubeconfig', kubeconfig]);
      expect(added.code, added.output).toBe(0);
      await shows(/default\/second +ready +4 /, 'the applied Service ready on the four nodes');
    } finally {
      run.child.kill('SIGINT');
    }
    expect(await run.closed, run.output()).toBe(0);
    expect(run.output()).not.toContain('rbac: refused');
  }, 150_000);
});

describe('the CLI in real mode', () => {
  const clusterName = `real-${Date.now().toString(36)}`;
  let kube: FakeKubeApiServer;
  let network: SimulatedNetwork;
  let kubeconfig: string;
  let controller: ReturnType<typeof start> | undefined;
  // The controller reaches the emulator through a proxy that can refuse chosen calls.
  let proxy: AwsFaultProxy;
  const dir = mkdtempSync(join(tmpdir(), 'cli-real-'));
  const instances: { name: string; providerID: string }[] = [];

  const runArgs = () => [
    'run',
    '--kubeconfig',
    kubeconfig,
    '--cluster-name',
    clusterName,
    '--vpc-id',
    network.vpcId,
    '--backend-security-group-id',
    network.backendSecurityGroupId,
    '--queue-name',
    `${clusterName}-work`,
    '--table-name',
    `${clusterName}-state`,
    '--claim-classless',
  ];

  beforeAll(async () => {
    proxy = await AwsFaultProxy.start(endpoint);
    kube = await FakeKubeApiServer.start();
    kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, kube.kubeconfigText());
    network = await createSimulatedNetwork(aws, clusterName);
    instances.push(...(await network.addInstances(2)));
    for (const node of instances) {
      kube.store.create('nodes', '', {
        metadata: { name: node.name },
        spec: { providerID: node.providerID },
        status: { conditions: [{ type: 'Ready', status: 'True' }] },
      });
    }
  });

  afterAll(async () => {
    controller?.child.kill('SIGKILL');
    await kube.stop();
    await proxy.stop();
  });

  const instanceIds = () => instances.map((n) => n.providerID.split('/').pop() ?? '').sort();
  const service = (name: string) => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: 'default' },
    spec: { type: 'LoadBalancer', ports: [{ name: 'http', protocol: 'TCP', port: 80 }] },
  });

  it('without the queue and table it says to create them; with --create-resources it runs', async () => {
    const refused = await cli(runArgs(), awsEnv);
    expect(refused.code).toBe(2);
    expect(refused.output).toContain('does not exist (use --create-resources)');
    controller = start(process.execPath, [...cliArgs, ...runArgs(), '--create-resources'], {
      ...awsEnv,
      AWS_ENDPOINT_URL: proxy.url,
    });
    await eventually(
      () => Promise.resolve(controller?.output() ?? ''),
      (out) => out.includes('Managing the cluster'),
      'the controller to start',
    );
  }, 60_000);

  it('creates an NLB for an applied Service, with every node as a target and the status set', async () => {
    const file = join(dir, 'web.json');
    writeFileSync(file, JSON.stringify(service('web')));
    const applied = await cli(['apply', '-f', file, '--kubeconfig', kubeconfig]);
    expect(applied.output).toContain('service/default/web created');
    await eventually(
      () => inventory(clusterName),
      (inv) => inv.resources.includes('load-balancer (default/web)'),
      'the NLB',
    );
    await eventually(
      () => registeredTargets(clusterName),
      (t) => t.length === 2,
      'targets',
    );
    expect(await registeredTargets(clusterName)).toEqual(instanceIds());
    const status = await eventually(
      () => Promise.resolve(kube.store.get('services', 'default', 'web')),
      (s) => JSON.stringify(s).includes('elb.amazonaws.com'),
      'the status hostname',
    );
    expect((status as { metadata: { finalizers?: string[] } }).metadata.finalizers).toEqual([
      upstreamFinalizer,
    ]);
  }, 90_000);

  it('follows the nodes: an added node becomes a target, a removed one stops being one', async () => {
    const [added] = await network.addInstances(1);
    if (added === undefined) throw new Error('no instance');
    instances.push(added);
    kube.store.create('nodes', '', {
      metadata: { name: added.name },
      spec: { providerID: added.providerID },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    });
    await eventually(
      () => registeredTargets(clusterName),
      (t) => t.length === 3,
      '3 targets',
    );
    expect(await registeredTargets(clusterName)).toEqual(instanceIds());
    const removed = instances.shift();
    const result = await cli(['node', 'remove', removed?.name ?? '', '--kubeconfig', kubeconfig]);
    expect(result.code, result.output).toBe(0);
    await eventually(
      () => registeredTargets(clusterName),
      (t) => t.length === 2,
      '2 targets',
    );
    expect(await registeredTargets(clusterName)).toEqual(instanceIds());
  }, 90_000);

  /** Applies a Service, waits for its status, and returns its NLB's ARN. */
  async function applyAndWait(body: object, name: string): Promise<string> {
    const file = join(dir, `${name}.json`);
    writeFileSync(file, JSON.stringify(body));
    const applied = await cli(['apply', '-f', file, '--kubeconfig', kubeconfig]);
    expect(applied.code, applied.output).toBe(0);
    await eventually(
      () => Promise.resolve(hostnameOf(name)),
      (h) => h !== undefined,
      `the status of ${name}`,
    );
    const found = await tagging.send(
      new GetResourcesCommand({
        TagFilters: [
          { Key: ownershipTags.cluster, Values: [clusterName] },
          { Key: ownershipTags.service, Values: [`default/${name}`] },
        ],
        ResourceTypeFilters: ['elasticloadbalancing:loadbalancer'],
      }),
    );
    return found.ResourceTagMappingList?.[0]?.ResourceARN ?? '';
  }

  function hostnameOf(name: string): string | undefined {
    const stored = kube.store.get('services', 'default', name) as
      { status?: { loadBalancer?: { ingress?: { hostname?: string }[] } } } | undefined;
    return stored?.status?.loadBalancer?.ingress?.[0]?.hostname;
  }

  async function deleteAndWait(name: string): Promise<void> {
    const result = await cli(['delete', `default/${name}`, '--kubeconfig', kubeconfig]);
    expect(result.code, result.output).toBe(0);
    await eventually(
      () => inventory(clusterName),
      (inv) => !inv.resources.some((r) => r.endsWith(`(default/${name})`)),
      `cleanup of ${name}`,
    );
  }

  it('15 annotation changes 250 ms apart end with the NLB carrying the last value', async () => {
    const tags = 'service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags';
    const churn = service('churn');
    const arn = await applyAndWait(
      { ...churn, metadata: { ...churn.metadata, annotations: { [tags]: 'churn=0' } } },
      'churn',
    );
    const api = kube.kubeConfig().makeApiClient(CoreV1Api);
    for (let i = 1; i <= 15; i++) {
      await api.patchNamespacedService(
        {
          name: 'churn',
          namespace: 'default',
          body: { metadata: { annotations: { [tags]: `churn=${i}` } } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      await sleep(250);
    }
    await eventually(
      async () =>
        (
          await elbv2.send(new DescribeTagsCommand({ ResourceArns: [arn] }))
        ).TagDescriptions?.[0]?.Tags?.find((t) => t.Key === 'churn')?.Value,
      (value) => value === '15',
      'the last tag value on the NLB',
    );
    await deleteAndWait('churn');
  }, 120_000);

  it('CreateLoadBalancer answering TooManyLoadBalancers twice, then success, converges with no spec change', async () => {
    proxy.failNext('CreateLoadBalancer', 'TooManyLoadBalancers', 2);
    await applyAndWait(service('quota'), 'quota');
    expect(proxy.refused).toEqual([
      'CreateLoadBalancer: TooManyLoadBalancers',
      'CreateLoadBalancer: TooManyLoadBalancers',
    ]);
    expect(controller?.output()).toContain('"failureClass":"quota"');
    await deleteAndWait('quota');
  }, 120_000);

  it('deleting a Service held by example.com/hold clears its status and releases only our finalizer', async () => {
    const held = service('held');
    await applyAndWait(
      { ...held, metadata: { ...held.metadata, finalizers: ['example.com/hold'] } },
      'held',
    );
    const result = await cli(['delete', 'default/held', '--kubeconfig', kubeconfig]);
    expect(result.code, result.output).toBe(0);
    await eventually(
      () => Promise.resolve(hostnameOf('held')),
      (h) => h === undefined,
      'the status of held to be cleared',
    );
    const stored = kube.store.get('services', 'default', 'held') as {
      metadata: { finalizers?: string[]; deletionTimestamp?: string };
    };
    expect(stored.metadata.deletionTimestamp).toBeDefined();
    expect(stored.metadata.finalizers).toEqual(['example.com/hold']);
    expect((await inventory(clusterName)).resources.filter((r) => r.includes('held'))).toEqual([]);
    // The other controller lets go.
    await kube
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .patchNamespacedService(
        { name: 'held', namespace: 'default', body: { metadata: { finalizers: null } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
  }, 120_000);

  it('deletes the NLB, target group and security group with the Service', async () => {
    const result = await cli(['delete', 'default/web', '--kubeconfig', kubeconfig]);
    expect(result.code, result.output).toBe(0);
    await eventually(
      () => inventory(clusterName),
      (inv) => inv.resources.length === 0,
      'cleanup',
    );
    await eventually(
      () => Promise.resolve(kube.store.list('services').length),
      (n) => n === 0,
      'the Service to go once its finalizer is released',
    );
  }, 90_000);

  it('uninstall lists first, then deletes what it owns and releases finalizers; Ctrl-C stops cleanly', async () => {
    const file = join(dir, 'api.json');
    writeFileSync(file, JSON.stringify(service('api')));
    await cli(['apply', '-f', file, '--kubeconfig', kubeconfig]);
    await eventually(
      () => inventory(clusterName),
      (inv) => inv.resources.includes('load-balancer (default/api)'),
      'the NLB of api',
    );
    controller?.child.kill('SIGINT');
    expect(await controller?.closed).toBe(0);
    controller = undefined;

    const common = ['--kubeconfig', kubeconfig, '--cluster-name', clusterName, '--claim-classless'];
    const vpc = ['--vpc-id', network.vpcId, '--table-name', `${clusterName}-state`];
    const dry = await cli(['uninstall', ...common, ...vpc], awsEnv);
    expect(dry.code, dry.output).toBe(0);
    expect(dry.output).toMatch(/default\/api \(uid /);
    expect(dry.output).toContain('Dry run: nothing changed');
    expect((await inventory(clusterName)).resources).toContain('load-balancer (default/api)');

    const real = await cli(['uninstall', '--yes', ...common, ...vpc], awsEnv);
    expect(real.code, real.output).toBe(0);
    expect((await inventory(clusterName)).resources).toEqual([]);
    const api = kube.store.get('services', 'default', 'api') as {
      metadata: { finalizers?: string[] };
    };
    expect(api.metadata.finalizers ?? []).toEqual([]);
  }, 120_000);
});
