/**
 * The forwarder's footprint: streams Services and Nodes through the fake API server into (a) the
 * bundled forwarder, sending to moto's SQS, and (b) a baseline process that keeps full objects in
 * client-node informer caches (bench/informer-baseline.ts). Peak RSS and CPU time of each, read
 * from /proc. Used by `npm run bench:forwarder` and `npm run bench`.
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

async function measure(
  name: string,
  child: ChildProcess,
  done: () => Promise<boolean>,
): Promise<ProcessUsage> {
  const started = Date.now();
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  while (!(await done().catch(() => false))) {
    if (child.exitCode !== null) throw new Error(`${name} exited early:\n${output.slice(-2000)}`);
    if (Date.now() - started > 300_000)
      throw new Error(`${name} did not finish in 300 s:\n${output.slice(-2000)}`);
    await sleep(200);
  }
  const result = usage(child.pid ?? 0);
  child.kill('SIGKILL');
  return { name, ...result, seconds: (Date.now() - started) / 1000 };
}

/** Runs both processes against a moto at `endpoint`; each is killed when measured or on failure. */
export async function forwarderBench(
  endpoint: string,
  options: { services: number; nodes: number },
): Promise<ForwarderResult> {
  const { services: serviceCount, nodes: nodeCount } = options;
  const kube = await FakeKubeApiServer.start();
  const children: ChildProcess[] = [];
  let front: InClusterFront | undefined;
  try {
    for (let i = 0; i < nodeCount; i++) kube.store.create('nodes', '', realisticNode(i));
    for (let i = 0; i < serviceCount; i++)
      kube.store.create('services', realisticService(i).metadata.namespace, realisticService(i));
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
    const forwarded = async () => {
      const attributes = await sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: queueUrl,
          AttributeNames: ['ApproximateNumberOfMessages'],
        }),
      );
      // Every LoadBalancer Service once, plus the coalesced node triggers.
      return Number(attributes.Attributes?.ApproximateNumberOfMessages ?? 0) >= lbServices;
    };
    const forwarderResult = await measure('forwarder (fingerprints)', forwarder, forwarded);

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
