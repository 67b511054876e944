/**
 * Oversized Services at the forwarder (issue 19, finding 2): one tenant fills its Services with
 * `loadBalancerSourceRanges` up to Kubernetes' object size limit (85,000 ranges, ~1.5 MB of JSON
 * each), beside an ordinary Service in another namespace. The production bundle runs as in a Pod
 * (HTTPS, the ServiceAccount's token, the project's RBAC, the container's Node flags) and sends to
 * moto's SQS. Measured: its peak RSS (VmHWM, sampled from /proc while it runs, so a run that
 * crashes still reports how high it got), whether it stayed up, and which keys reached the queue,
 * first from the initial list, then from watch events. Used by `npm run bench:forwarder` and the
 * reliability row 'adversarial: oversized Services at the forwarder'.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { buildForwarder } from '../../functions/forwarder/build';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import { loadProjectRbac } from '../../functions/local/project-rbac';
import { startInClusterFront, type InClusterFront } from '../../kit/in-cluster-front';
import { track } from '../support/children';

/** The Deployment's memory limit (infra/k8s/deployment.yaml): past it the kubelet kills the Pod. */
export const forwarderMemoryLimitMiB = 192;

export interface OversizedOptions {
  /** Oversized Services in the tenant's namespace before the forwarder starts (initial list). */
  readonly listed: number;
  /** Oversized Services created while it watches. */
  readonly watched: number;
  /** Source ranges per oversized Service. */
  readonly ranges: number;
}

export interface OversizedResult {
  readonly options: OversizedOptions;
  /** Bytes of one oversized Service as JSON. */
  readonly serviceBytes: number;
  readonly peakRssMiB: number;
  readonly cpuSeconds: number;
  readonly seconds: number;
  /** Why the forwarder stopped early (its last output), or undefined if it stayed up. */
  readonly crashed: string | undefined;
  /** Keys expected on the queue, and those that arrived. */
  readonly expected: readonly string[];
  readonly delivered: readonly string[];
  readonly limitMiB: number;
}

export const tenantNamespace = 'tenant-heavy';
export const quietNamespace = 'team-quiet';

/** `count` distinct /32 ranges: ~17 bytes of JSON each, so 85,000 fill a Service to ~1.5 MB. */
export function sourceRanges(count: number): string[] {
  return Array.from(
    { length: count },
    (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}/32`,
  );
}

function service(namespace: string, name: string, ranges: string[]) {
  return {
    metadata: { name, namespace },
    spec: {
      type: 'LoadBalancer',
      selector: { app: name },
      ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
      ...(ranges.length > 0 ? { loadBalancerSourceRanges: ranges } : {}),
    },
  };
}

/** The container's Node flags, read from the Deployment's NODE_OPTIONS (infra/k8s). */
function containerNodeFlags(): string[] {
  const deployment = readFileSync(join('infra', 'k8s', 'deployment.yaml'), 'utf8');
  return (/name: NODE_OPTIONS\n\s+value: (.*)/.exec(deployment)?.[1] ?? '')
    .split(/\s+/)
    .filter((flag) => flag !== '');
}

/** The container runs Node 24; the pinned dev dependency has it whatever `node` the shell has. */
function node24(): string {
  const pinned = join(process.cwd(), 'node_modules', 'node', 'bin', 'node');
  return existsSync(pinned) ? pinned : process.execPath;
}

function usage(pid: number): { hwmKb: number; cpuSeconds: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return {
      hwmKb: Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0),
      cpuSeconds: (Number(fields[11] ?? 0) + Number(fields[12] ?? 0)) / 100,
    };
  } catch {
    return undefined; // gone between samples
  }
}

/** Runs the scenario against the moto at `endpoint`; the forwarder is killed at the end. */
export async function oversizedForwarderRun(
  endpoint: string,
  options: OversizedOptions,
): Promise<OversizedResult> {
  const rbac = loadProjectRbac();
  const kube = await FakeKubeApiServer.start({ rbac: rbac.authorizer });
  let front: InClusterFront | undefined;
  let child: ChildProcess | undefined;
  const started = Date.now();
  try {
    const ranges = sourceRanges(options.ranges);
    const heavy = (i: number) => service(tenantNamespace, `heavy-${i}`, ranges);
    const serviceBytes = JSON.stringify(heavy(0)).length;
    for (let i = 0; i < options.listed; i++)
      kube.store.create('services', tenantNamespace, heavy(i));
    kube.store.create('services', quietNamespace, service(quietNamespace, 'listed', []));

    const sqs = new SQSClient({
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    });
    const queueUrl =
      (await sqs.send(new CreateQueueCommand({ QueueName: `oversized-${Date.now()}` }))).QueueUrl ??
      '';
    front = await startInClusterFront(kube.url, {
      upstreamToken: kube.tokenFor(rbac.forwarder),
    });
    const bundle = join(mkdtempSync(join(tmpdir(), 'fwd-oversized-')), 'main.mjs');
    await buildForwarder(bundle);
    const forwarder = track(
      spawn(node24(), [...containerNodeFlags(), bundle], {
        env: {
          PATH: process.env.PATH ?? '',
          ...front.env,
          AWS_ACCESS_KEY_ID: 'testing',
          AWS_SECRET_ACCESS_KEY: 'testing',
          CONTROLLER_CONFIG: JSON.stringify({
            clusterName: 'oversized',
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
    child = forwarder;
    let output = '';
    forwarder.stdout?.on(
      'data',
      (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)),
    );
    forwarder.stderr?.on(
      'data',
      (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)),
    );
    const pid = forwarder.pid ?? 0;
    let hwmKb = 0;
    let cpuSeconds = 0;
    const sampler = setInterval(() => {
      const now = usage(pid);
      if (now === undefined) return;
      hwmKb = Math.max(hwmKb, now.hwmKb);
      cpuSeconds = now.cpuSeconds;
    }, 50);

    const delivered = new Set<string>();
    const drain = async () => {
      for (;;) {
        const page = await sqs.send(
          new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }),
        );
        const messages = page.Messages ?? [];
        if (messages.length === 0) return;
        for (const m of messages) {
          const body = JSON.parse(m.Body ?? '{}') as { kind?: string; key?: string };
          if (body.kind === 'service' && body.key !== undefined) delivered.add(body.key);
        }
        await sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
          }),
        );
      }
    };
    let crashed: string | undefined;
    const waitFor = async (keys: readonly string[]) => {
      const deadline = Date.now() + 120_000;
      while (keys.some((k) => !delivered.has(k)) && Date.now() < deadline) {
        if (forwarder.exitCode !== null || forwarder.signalCode !== null) {
          crashed = `exited (${forwarder.exitCode ?? forwarder.signalCode ?? '?'}): ${output.slice(-1500)}`;
          return;
        }
        await drain();
        await sleep(200);
      }
    };
    const listedKeys = [
      ...Array.from({ length: options.listed }, (_, i) => `${tenantNamespace}/heavy-${i}`),
      `${quietNamespace}/listed`,
    ];
    await waitFor(listedKeys);
    const watchedKeys: string[] = [];
    if (crashed === undefined) {
      for (let i = 0; i < options.watched; i++) {
        const n = options.listed + i;
        kube.store.create('services', tenantNamespace, heavy(n));
        watchedKeys.push(`${tenantNamespace}/heavy-${n}`);
      }
      kube.store.create('services', quietNamespace, service(quietNamespace, 'watched', []));
      watchedKeys.push(`${quietNamespace}/watched`);
      await waitFor(watchedKeys);
    }
    // One last sample after the watch: the peak is what the kubelet would have judged.
    await sleep(100);
    clearInterval(sampler);
    const last = usage(pid);
    if (last !== undefined) hwmKb = Math.max(hwmKb, last.hwmKb);
    return {
      options,
      serviceBytes,
      peakRssMiB: Math.round((hwmKb / 1024) * 10) / 10,
      cpuSeconds: last?.cpuSeconds ?? cpuSeconds,
      seconds: (Date.now() - started) / 1000,
      crashed,
      expected: [...listedKeys, ...watchedKeys],
      delivered: [...delivered].sort(),
      limitMiB: forwarderMemoryLimitMiB,
    };
  } finally {
    if (child?.exitCode === null) child.kill('SIGKILL');
    await front?.close();
    await kube.stop();
  }
}
