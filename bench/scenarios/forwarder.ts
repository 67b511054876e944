/**
 * The forwarder's footprint: streams Services, Nodes, and ip-mode Services with one EndpointSlice
 * each, through the fake API server into (a) the bundled forwarder, sending to moto's SQS, and
 * (b) a baseline process that keeps full objects in client-node informer caches
 * (bench/informer-baseline.ts). Once both have listed, every slice changes once through the
 * watch. Peak RSS and CPU time of each, read from /proc. Used by `npm run bench:forwarder` and
 * `npm run bench`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { startInClusterFront, type InClusterFront } from '../../kit/in-cluster-front';
import { buildForwarder } from '../../functions/forwarder/build';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import { track } from '../support/children';

export const rssTargetMiB = 100;
/** The container's Node flags, read from the Deployment's NODE_OPTIONS (infra/k8s). */
const forwarderNodeFlags = (
  /name: NODE_OPTIONS\n\s+value: (.*)/.exec(
    readFileSync('infra/k8s/deployment.yaml', 'utf8'),
  )?.[1] ?? ''
)
  .split(/\s+/)
  .filter((flag) => flag !== '');

export interface ProcessUsage {
  readonly name: string;
  readonly peakRssMiB: number;
  readonly cpuSeconds: number;
  readonly seconds: number;
}

export interface ForwarderResult {
  readonly services: number;
  readonly loadBalancerServices: number;
  readonly nodes: number;
  /** LoadBalancer Services with `nlb-target-type: ip`, beside `services`, one slice each. */
  readonly ipServices: number;
  /** Endpoints per slice. */
  readonly endpoints: number;
  readonly forwarder: ProcessUsage;
  readonly baseline: ProcessUsage;
  readonly targetMiB: number;
  readonly within: boolean;
}

/** Peak RSS (MiB) and CPU seconds of a live process, from /proc. */
function usage(pid: number): { peakRssMiB: number; cpuSeconds: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const peakKb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  const ticks = Number(fields[11] ?? 0) + Number(fields[12] ?? 0);
  return { peakRssMiB: Math.round((peakKb / 1024) * 10) / 10, cpuSeconds: ticks / 100 };
}

function realisticNode(i: number) {
  const id = `i-${(0x0a00000000000000n + BigInt(i)).toString(16).padStart(17, '0')}`;
  return {
    metadata: {
      name: `ip-10-${Math.floor(i / 250)}-${i % 250}-1.ec2.internal`,
      labels: Object.fromEntries(
        Array.from({ length: 15 }, (_, n) => [`example.com/label-${n}`, `value-${n}-${i}`]),
      ),
      annotations: {
        'node.alpha.kubernetes.io/ttl': '0',
        'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
      },
    },
    spec: { providerID: `aws:///us-east-1a/${id}`, podCIDR: `10.${i % 250}.0.0/24` },
    status: {
      conditions: ['MemoryPressure', 'DiskPressure', 'PIDPressure', 'Ready'].map((type) => ({
        type,
        status: type === 'Ready' ? 'True' : 'False',
        lastHeartbeatTime: '2026-11-30T00:00:00Z',
        lastTransitionTime: '2026-11-30T00:00:00Z',
        reason: `Kubelet${type}`,
        message: `kubelet reports ${type}`,
      })),
      addresses: [
        { type: 'InternalIP', address: `10.0.${i % 250}.${i % 200}` },
        { type: 'Hostname', address: `ip-10-0-${i}.ec2.internal` },
      ],
      capacity: { cpu: '8', memory: '32Gi', pods: '110', 'ephemeral-storage': '100Gi' },
      allocatable: { cpu: '7910m', memory: '31Gi', pods: '110', 'ephemeral-storage': '95Gi' },
      nodeInfo: {
        kubeletVersion: 'v1.34.0',
        osImage: 'Amazon Linux 2023',
        containerRuntimeVersion: 'containerd://2.0.0',
        architecture: 'amd64',
        operatingSystem: 'linux',
      },
      images: Array.from({ length: 20 }, (_, n) => ({
        names: [
          `registry.example.com/team/image-${n}@sha256:${'ab'.repeat(32)}`,
          `registry.example.com/team/image-${n}:v${n}`,
        ],
        sizeBytes: 100_000_000 + n,
      })),
    },
  };
}

function realisticService(i: number) {
  const lb = i % 10 === 0;
  return {
    metadata: {
      name: `svc-${i}`,
      namespace: `team-${i % 50}`,
      labels: { app: `app-${i}`, 'app.kubernetes.io/managed-by': 'helm' },
      annotations: {
        'meta.helm.sh/release-name': `release-${i}`,
        'meta.helm.sh/release-namespace': `team-${i % 50}`,
        ...(lb ? { 'service.beta.kubernetes.io/aws-load-balancer-scheme': 'internal' } : {}),
      },
    },
    spec: {
      type: lb ? 'LoadBalancer' : 'ClusterIP',
      selector: { app: `app-${i}` },
      ports: [
        { name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 },
        { name: 'metrics', protocol: 'TCP', port: 9090, targetPort: 9090 },
      ],
    },
  };
}

/** A LoadBalancer Service whose NLB targets its pods (issue 36). */
function ipService(i: number) {
  const namespace = `team-${i % 50}`;
  return {
    metadata: {
      name: `ip-svc-${i}`,
      namespace,
      uid: `0000${i}`.padStart(8, '0') + '-aaaa-4bbb-8ccc-ddddeeeeffff',
      labels: { app: `ip-app-${i}`, 'app.kubernetes.io/managed-by': 'helm' },
      annotations: {
        'meta.helm.sh/release-name': `ip-release-${i}`,
        'meta.helm.sh/release-namespace': namespace,
        'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type': 'ip',
        'service.beta.kubernetes.io/aws-load-balancer-scheme': 'internal',
      },
    },
    spec: {
      type: 'LoadBalancer',
      // Pod targets need no NodePorts (and the fake API server's range holds only 2,768).
      allocateLoadBalancerNodePorts: false,
      selector: { app: `ip-app-${i}` },
      ports: [
        { name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 },
        { name: 'metrics', protocol: 'TCP', port: 9090, targetPort: 9090 },
      ],
    },
  };
}

/**
 * The slice the EndpointSlice controller writes for `ipService(i)`: pods with their targetRefs,
 * nodes, zones, hints and conditions; `version` flips one pod's readiness per step.
 */
function ipServiceSlice(i: number, endpoints: number, version = 0) {
  const service = ipService(i);
  const zones = ['us-east-1a', 'us-east-1b', 'us-east-1c'];
  return {
    metadata: {
      name: `${service.metadata.name}-${(0x10000 + i).toString(36)}`,
      namespace: service.metadata.namespace,
      generateName: `${service.metadata.name}-`,
      labels: {
        'kubernetes.io/service-name': service.metadata.name,
        'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io',
        app: service.metadata.labels.app,
        'app.kubernetes.io/managed-by': 'helm',
      },
      annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': '2026-11-30T00:00:00Z' },
      ownerReferences: [
        {
          apiVersion: 'v1',
          kind: 'Service',
          name: service.metadata.name,
          uid: service.metadata.uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    addressType: 'IPv4',
    ports: [
      { name: 'http', protocol: 'TCP', port: 8080 },
      { name: 'metrics', protocol: 'TCP', port: 9090 },
    ],
    endpoints: Array.from({ length: endpoints }, (_, n) => {
      const ready = !(version > 0 && n === version % endpoints);
      const zone = zones[n % zones.length] ?? 'us-east-1a';
      const pod = `${service.metadata.name}-7d9f8c6b5-${(i * 100 + n).toString(36).padStart(5, 'x')}`;
      return {
        addresses: [`10.${64 + (i >> 8)}.${i & 255}.${n + 10}`],
        conditions: { ready, serving: ready, terminating: false },
        nodeName: `ip-10-${Math.floor(n / 250)}-${n % 250}-1.ec2.internal`,
        zone,
        hints: { forZones: [{ name: zone }] },
        targetRef: {
          kind: 'Pod',
          namespace: service.metadata.namespace,
          name: pod,
          uid: `${(i * 100 + n).toString(16).padStart(8, '0')}-1111-4222-8333-444455556666`,
        },
      };
    }),
  };
}

/** The forwarder's own figures, from its /metrics (its port is in its start log line). */
async function forwarderMetrics(output: () => string): Promise<Map<string, number>> {
  const port = /"message":"forwarder started".*?"port":(\d+)/.exec(output())?.[1];
  if (port === undefined) return new Map();
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return new Map(
    text
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'))
      .map((line) => {
        const at = line.lastIndexOf(' ');
        return [line.slice(0, at), Number(line.slice(at + 1))] as const;
      }),
  );
}

async function measure(
  name: string,
  child: ChildProcess,
  done: (output: () => string) => Promise<boolean>,
): Promise<ProcessUsage> {
  const started = Date.now();
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  while (!(await done(() => output).catch(() => false))) {
    if (child.exitCode !== null) throw new Error(`${name} exited early:\n${output.slice(-2000)}`);
    if (Date.now() - started > 300_000)
      throw new Error(`${name} did not finish in 300 s:\n${output.slice(-2000)}`);
    await sleep(200);
  }
  const result = usage(child.pid ?? 0);
  child.kill('SIGKILL');
  return { name, ...result, seconds: (Date.now() - started) / 1000 };
}

/**
 * When the forwarder is done: every LoadBalancer Service sent once (ip-mode ones included), plus
 * the coalesced node triggers; then every slice is changed once through the watch, each change a
 * targets message, after which it holds a fingerprint for every slice and nothing is pending.
 */
function allForwarded(
  kube: FakeKubeApiServer,
  queued: () => Promise<number>,
  counts: { lbServices: number; ipServices: number; endpoints: number },
): (output: () => string) => Promise<boolean> {
  const { lbServices, ipServices, endpoints } = counts;
  let slicesChanged = false;
  return async (output) => {
    if ((await queued()) < lbServices + ipServices) return false;
    const metrics = await forwarderMetrics(output);
    const slicesKept = metrics.get('forwarder_objects_known{resource="endpointslices"}');
    if (!slicesChanged) {
      if (slicesKept === undefined) return false;
      for (let i = 0; i < ipServices; i++) {
        const slice = ipServiceSlice(i, endpoints, 1);
        const { namespace, name } = slice.metadata;
        const { metadata } = kube.store.get('endpointslices', namespace, name);
        kube.store.update('endpointslices', namespace, name, { ...slice, metadata });
      }
      slicesChanged = true;
      return false;
    }
    return (
      slicesKept === ipServices &&
      metrics.get('forwarder_buffer_depth') === 0 &&
      (await queued()) >= lbServices + 2 * ipServices
    );
  };
}

function populate(
  kube: FakeKubeApiServer,
  counts: { serviceCount: number; nodeCount: number; ipServices: number; endpoints: number },
): void {
  for (let i = 0; i < counts.nodeCount; i++) kube.store.create('nodes', '', realisticNode(i));
  for (let i = 0; i < counts.serviceCount; i++)
    kube.store.create('services', realisticService(i).metadata.namespace, realisticService(i));
  for (let i = 0; i < counts.ipServices; i++) {
    kube.store.create('services', ipService(i).metadata.namespace, ipService(i));
    const slice = ipServiceSlice(i, counts.endpoints);
    kube.store.create('endpointslices', slice.metadata.namespace, slice);
  }
}

/** Runs both processes against a moto at `endpoint`; each is killed when measured or on failure. */
export async function forwarderBench(
  endpoint: string,
  options: { services: number; nodes: number; ipServices?: number; endpoints?: number },
): Promise<ForwarderResult> {
  const { services: serviceCount, nodes: nodeCount } = options;
  const ipServices = options.ipServices ?? 1_000;
  const endpoints = options.endpoints ?? 20;
  const kube = await FakeKubeApiServer.start();
  const children: ChildProcess[] = [];
  let front: InClusterFront | undefined;
  try {
    populate(kube, { serviceCount, nodeCount, ipServices, endpoints });
    const dir = mkdtempSync(join(tmpdir(), 'bench-fwd-'));
    writeFileSync(join(dir, 'kubeconfig'), kube.kubeconfigText());
    // The forwarder runs as in a Pod (HTTPS, ServiceAccount token); the baseline uses a kubeconfig.
    front = await startInClusterFront(kube.url);
    const bundle = join(dir, 'main.mjs');
    await buildForwarder(bundle);
    const sqs = new SQSClient({
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    });
    const queueUrl =
      (await sqs.send(new CreateQueueCommand({ QueueName: `bench-forwarder-${Date.now()}` })))
        .QueueUrl ?? '';
    const lbServices = Math.ceil(serviceCount / 10);
    const env = {
      ...process.env,
      KUBECONFIG: join(dir, 'kubeconfig'),
      AWS_ACCESS_KEY_ID: 'x',
      AWS_SECRET_ACCESS_KEY: 'x',
    };

    // The container's Node flags: a small young generation and a capped old one keep the heap,
    // and so RSS, near what is live.
    const forwarder = track(
      spawn(process.execPath, [...forwarderNodeFlags, bundle], {
        env: {
          ...env,
          ...front.env,
          CONTROLLER_CONFIG: JSON.stringify({
            clusterName: 'bench',
            region: 'us-east-1',
            claimClassless: true,
            queueUrl,
            sqsEndpoint: endpoint,
            port: 0,
          }),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    children.push(forwarder);
    const queued = async () => {
      const attributes = await sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: queueUrl,
          AttributeNames: ['ApproximateNumberOfMessages'],
        }),
      );
      return Number(attributes.Attributes?.ApproximateNumberOfMessages ?? 0);
    };
    const forwarderResult = await measure(
      'forwarder (fingerprints)',
      forwarder,
      allForwarded(kube, queued, { lbServices, ipServices, endpoints }),
    );

    const baseline = track(
      spawn(process.execPath, ['--import', 'tsx', 'bench/informer-baseline.ts'], {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    children.push(baseline);
    let baselineOutput = '';
    baseline.stdout.on('data', (chunk: Buffer) => (baselineOutput += chunk.toString()));
    const baselineResult = await measure(
      'baseline (client-node informers, full objects)',
      baseline,
      () => Promise.resolve(baselineOutput.includes('synced')),
    );
    return {
      services: serviceCount,
      loadBalancerServices: lbServices,
      nodes: nodeCount,
      ipServices,
      endpoints,
      forwarder: forwarderResult,
      baseline: baselineResult,
      targetMiB: rssTargetMiB,
      within: forwarderResult.peakRssMiB <= rssTargetMiB,
    };
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await front?.close();
    await kube.stop();
  }
}
