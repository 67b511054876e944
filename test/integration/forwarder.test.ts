import { spawn } from 'node:child_process';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { ApiException, CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, inject, it, vi } from 'vitest';
import { callerRoleOption } from '../../functions/aws/caller-role';
import { SqsWorkQueue } from '../../functions/queue/sqs-work-queue';
import { buildForwarder, forwarderBundleLimitBytes } from '../../functions/forwarder/build';
import { Forwarder } from '../../functions/forwarder/forwarder';
import { InClusterConnection } from '../../functions/kube/in-cluster';
import { KubeApiClient } from '../../functions/kube/kube-api-client';
import { listPage } from '../../functions/forwarder/resource-watch';
import { AwsCallRecorder } from '../../kit/aws-calls';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import { loadProjectRbac } from '../../functions/local/project-rbac';
import { loadBalancerService, readyNode } from '../support/kube-objects';
import { startInClusterFront } from '../../kit/in-cluster-front';
import { MotoAccount } from '../../kit/moto';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const claim = { loadBalancerClass: 'serverless-service-controller.io/nlb', claimClassless: true };
/** The forwarder runs as its ServiceAccount, under the RBAC of infra/k8s; the test as the admin. */
const rbac = loadProjectRbac();

let kube: FakeKubeApiServer;
let api: CoreV1Api;
let sqs: SQSClient;
/** The forwarder's own client, built as functions/forwarder/main.ts builds it. */
let forwarderSqs: SQSClient;
let queueUrl: string;
let recorder: AwsCallRecorder;
let forwarder: Forwarder;
const received: string[] = [];
/** Heartbeats, kept apart from the work they would interleave with. */
const heartbeats: { sendFailures: number; pending: number }[] = [];

async function startForwarder(
  options: { heartbeatSeconds?: number; unhealthyAfterSeconds?: number; now?: () => number } = {},
) {
  forwarder = new Forwarder({
    kubeConfig: kube.kubeConfig({ as: rbac.forwarder }),
    claim,
    nodePolicy: 'stable',
    send: (messages) => new SqsWorkQueue(forwarderSqs, queueUrl).send(messages),
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 200))),
    ...options,
  });
  forwarder.start();
  await vi.waitFor(() => expect(forwarder.ready).toBe(true));
}

/** Everything on the queue so far, as `kind key|reason` lines (deleted as read). */
async function drainQueue(): Promise<string[]> {
  for (;;) {
    const page = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
      }),
    );
    const messages = page.Messages ?? [];
    if (messages.length === 0) return received;
    for (const m of messages) {
      const body = JSON.parse(m.Body ?? '{}') as {
        kind: string;
        key?: string;
        reason?: string;
        sendFailures?: number;
        pending?: number;
      };
      if (body.kind === 'heartbeat')
        heartbeats.push({ sendFailures: body.sendFailures ?? -1, pending: body.pending ?? -1 });
      else received.push(`${body.kind} ${body.key ?? body.reason ?? ''}`);
      await sqs.send(
        new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }),
      );
    }
  }
}

/**
 * How long a step may take on a loaded machine: Vitest's default second is too short for a watch
 * to be re-opened and re-listed while every core runs other test files.
 */
const patience = { timeout: 10_000, interval: 50 };

async function settle() {
  await vi.waitFor(() => expect(forwarder.publisher.depth).toBe(0), patience);
  await new Promise((resolve) => setTimeout(resolve, 100));
  await vi.waitFor(() => expect(forwarder.publisher.depth).toBe(0), patience);
  return drainQueue();
}

beforeEach(async () => {
  received.length = 0;
  heartbeats.length = 0;
  kube = await FakeKubeApiServer.start({ rbac: rbac.authorizer });
  api = kube.kubeConfig().makeApiClient(CoreV1Api);
  recorder = new AwsCallRecorder();
  const account = new MotoAccount();
  sqs = recorder.attach(account.client(SQSClient, { maxAttempts: 1 }));
  forwarderSqs = recorder.attach(
    account.client(SQSClient, { maxAttempts: 1, ...callerRoleOption('forwarder') }),
  );
  queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'work' }))).QueueUrl ?? '';
});

afterEach(async () => {
  await forwarder?.stop(1000);
  await kube.stop();
  // A call outside the forwarder's ClusterRole fails the test that made it.
  expect(kube.denials.map((d) => d.message)).toEqual([]);
});

describe('forwarder', () => {
  it('forwards the add, update and delete of a LoadBalancer Service', async () => {
    await startForwarder();
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('web') });
    expect(await settle()).toEqual(['service default/web']);
    await api.patchNamespacedService(
      { name: 'web', namespace: 'default', body: { metadata: { annotations: { a: 'b' } } } },
      merge,
    );
    expect(await settle()).toEqual(['service default/web', 'service default/web']);
    await api.deleteNamespacedService({ name: 'web', namespace: 'default' });
    expect(await settle()).toHaveLength(3);
  });

  it('sends every LoadBalancer Service once at start (the initial list), and no ClusterIP Service', async () => {
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('web') });
    await api.createNamespacedService({
      namespace: 'default',
      body: { metadata: { name: 'internal' }, spec: { ports: [{ port: 80 }] } },
    });
    await startForwarder();
    expect(await settle()).toEqual(['service default/web']);
  });

  it('does not forward a ClusterIP Service, a status-only update, or a re-list without changes', async () => {
    await startForwarder();
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('web') });
    await settle();
    await api.createNamespacedService({
      namespace: 'default',
      body: { metadata: { name: 'internal' }, spec: { ports: [{ port: 80 }] } },
    });
    await api.patchNamespacedServiceStatus(
      {
        name: 'web',
        namespace: 'default',
        body: { status: { loadBalancer: { ingress: [{ hostname: 'x.elb.amazonaws.com' }] } } },
      },
      merge,
    );
    await settle();
    // Move the revision past the service watch, compact, and drop it: a 410 and a full re-list
    // of objects that did not change.
    kube.store.create('nodes', '', readyNode('bump') as never);
    kube.compact();
    kube.dropWatches();
    await vi.waitFor(() =>
      expect(
        kube.requests.filter(
          (r) => r.path === '/api/v1/services' && r.query.get('watch') !== 'true',
        ),
      ).toHaveLength(2),
    );
    expect((await settle()).filter((l) => l.startsWith('service'))).toEqual([
      'service default/web',
    ]);
    expect(forwarder.filtered).toBeGreaterThanOrEqual(3);
  });

  it('triggers node sync on node add, delete and exclusion-label change, not on a heartbeat', async () => {
    kube.store.create('nodes', '', readyNode('n1') as never);
    await startForwarder();
    const nodes = async () => (await settle()).filter((l) => l.startsWith('node'));
    expect(await nodes()).toEqual(['node node n1 added']);
    await api.patchNodeStatus(
      {
        name: 'n1',
        body: {
          status: {
            conditions: [
              { type: 'Ready', status: 'True', lastHeartbeatTime: new Date().toISOString() },
            ],
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    expect(await nodes()).toHaveLength(1);
    await api.patchNode(
      {
        name: 'n1',
        body: {
          metadata: {
            labels: { 'node.kubernetes.io/exclude-from-external-load-balancers': 'true' },
          },
        },
      },
      merge,
    );
    expect(await nodes()).toEqual(['node node n1 added', 'node node n1 changed']);
    await api.createNode({ body: readyNode('n2', 'i-0fedcba9876543210') });
    await api.deleteNode({ name: 'n2' });
    expect(await nodes()).toHaveLength(4);
  });

  it('loses nothing across a dropped watch: an update made in the gap is forwarded', async () => {
    await startForwarder();
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('web') });
    await settle();
    kube.dropWatches();
    kube.store.patch('services', 'default', 'web', 'merge', {
      metadata: { annotations: { changed: 'in-the-gap' } },
    });
    expect(
      await vi.waitFor(async () => {
        const lines = await settle();
        expect(lines).toHaveLength(2);
        return lines;
      }, patience),
    ).toEqual(['service default/web', 'service default/web']);
  });

  it('loses nothing across 410 Gone: a deletion made in the gap is forwarded after the re-list', async () => {
    await startForwarder();
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('web') });
    await settle();
    kube.dropWatches();
    kube.store.delete('services', 'default', 'web');
    kube.compact();
    await vi.waitFor(async () => expect(await settle()).toHaveLength(2), patience);
    expect(received).toEqual(['service default/web', 'service default/web']);
    expect(forwarder.services.size).toBe(0);
  });

  it('restarts a watch that fails with an error and keeps forwarding', async () => {
    await startForwarder();
    // Ready means listed; on a loaded machine the three watches may not be open yet to be broken.
    await vi.waitFor(() => expect(kube.openWatches).toBe(3));
    kube.resetWatches();
    await vi.waitFor(() => expect(forwarder.watchFailures).toBeGreaterThan(0));
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('web') });
    await vi.waitFor(async () => expect(await settle()).toEqual(['service default/web']), {
      timeout: 5000,
    });
  });

  it('keeps keys pending while SQS fails and delivers every one when it recovers', async () => {
    await startForwarder();
    recorder.injectFault({ operation: 'SendMessageBatch', kind: 'server-error', times: 4 });
    for (const name of ['a', 'b', 'c']) {
      await api.createNamespacedService({ namespace: 'default', body: loadBalancerService(name) });
    }
    await vi.waitFor(
      async () =>
        expect((await settle()).sort()).toEqual([
          'service default/a',
          'service default/b',
          'service default/c',
        ]),
      {
        timeout: 10_000,
      },
    );
    expect(forwarder.publisher.metrics.sendFailures).toBeGreaterThanOrEqual(1);
  });

  it('sends a heartbeat at start and then periodically, carrying the sends that failed since the last one got through', async () => {
    await startForwarder({ heartbeatSeconds: 1 });
    await settle();
    expect(heartbeats[0]).toEqual({ sendFailures: 0, pending: 0 });
    // Three sends fail (whatever they carried); the next heartbeat that gets through says so once.
    recorder.injectFault({ operation: 'SendMessageBatch', kind: 'server-error', times: 3 });
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('web') });
    await vi.waitFor(
      async () => {
        await settle();
        expect(heartbeats.reduce((sum, h) => sum + h.sendFailures, 0)).toBe(3);
        expect(received).toEqual(['service default/web']);
      },
      { timeout: 10_000 },
    );
    const reported = heartbeats.length;
    await vi.waitFor(
      async () => {
        await settle();
        expect(heartbeats.length).toBeGreaterThan(reported + 1);
      },
      { timeout: 5_000 },
    );
    // Failures are reported once: the heartbeats after recovery carry none.
    expect(heartbeats.slice(reported).every((h) => h.sendFailures === 0)).toBe(true);
    expect(forwarder.publisher.metrics.sendFailures).toBe(3);
  });

  it('fails /healthz once every send has failed for unhealthyAfterSeconds, and recovers with the queue', async () => {
    let clock = Date.now();
    await startForwarder({ unhealthyAfterSeconds: 60, now: () => clock });
    const port = await forwarder.listen(0, '127.0.0.1');
    const health = async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).status;
    await settle();
    recorder.injectFault({ operation: 'SendMessageBatch', kind: 'server-error', times: 1_000 });
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('web') });
    await vi.waitFor(() => expect(forwarder.publisher.metrics.sendFailures).toBeGreaterThan(0));
    // Failing, but not yet for long: a brief SQS outage must not restart the pod.
    clock += 59_000;
    expect(await health()).toBe(200);
    clock += 2_000;
    expect(await health()).toBe(503);
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toMatch(/forwarder_send_failing_seconds (6[0-9])/);
    recorder.clearFaults();
    await vi.waitFor(async () => expect(await settle()).toEqual(['service default/web']), {
      timeout: 10_000,
    });
    expect(await health()).toBe(200);
  });

  it('in a Pod: reaches the API server over HTTPS with the ServiceAccount token and CA, reading a renewed token', async () => {
    const front = await startInClusterFront(kube.url, {
      upstreamToken: kube.tokenFor(rbac.forwarder),
    });
    try {
      forwarder = new Forwarder({
        kubeConfig: new InClusterConnection(front.env),
        claim,
        nodePolicy: 'stable',
        send: (messages) => new SqsWorkQueue(forwarderSqs, queueUrl).send(messages),
        sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 200))),
      });
      forwarder.start();
      await vi.waitFor(() => expect(forwarder.ready).toBe(true));
      await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('a') });
      expect(await settle()).toEqual(['service default/a']);
      // The kubelet renews the token; the next request (the watch's restart) must carry it.
      front.rotateToken('token-2');
      kube.dropWatches();
      await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('b') });
      await vi.waitFor(async () => expect(await settle()).toContain('service default/b'), {
        timeout: 10_000,
      });
      expect(front.refused).toBe(0);
    } finally {
      await forwarder.stop(1000);
      await front.close();
    }
  });

  it('is refused what its ClusterRole does not grant: a 403 the API server records', async () => {
    await api.createNamespacedService({ namespace: 'default', body: loadBalancerService('web') });
    const asForwarder = kube.kubeConfig({ as: rbac.forwarder }).makeApiClient(CoreV1Api);
    const refused = await asForwarder
      .patchNamespacedService(
        { name: 'web', namespace: 'default', body: { metadata: { labels: { a: 'b' } } } },
        merge,
      )
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ApiException);
    expect((refused as ApiException<unknown>).code).toBe(403);
    expect(JSON.parse((refused as ApiException<string>).body)).toMatchObject({
      kind: 'Status',
      status: 'Failure',
      reason: 'Forbidden',
      code: 403,
      details: { name: 'web', kind: 'services' },
    });
    expect(kube.denials.map((d) => d.message)).toEqual([
      `services "web" is forbidden: User "${rbac.forwarder.name}" cannot patch resource "services" in API group "" in the namespace "default"`,
    ]);
    expect(kube.store.get('services', 'default', 'web').metadata.labels).toBeUndefined();
    // That refusal was the point; afterEach fails on any other.
    kube.denials.length = 0;
  });

  it('lists and watches Services, Nodes and EndpointSlices as its ClusterRole allows', async () => {
    await startForwarder();
    await vi.waitFor(() => expect(kube.openWatches).toBe(3));
    // A watch is recorded when it ends.
    kube.dropWatches();
    const asForwarder = (path: string) =>
      kube.requests
        .filter((r) => r.path === path && r.user === rbac.forwarder.name && r.status === 200)
        .map((r) => (r.query.get('watch') === 'true' ? 'watch' : 'list'));
    for (const path of [
      '/api/v1/services',
      '/api/v1/nodes',
      '/apis/discovery.k8s.io/v1/endpointslices',
    ])
      await vi.waitFor(() =>
        expect(new Set(asForwarder(path))).toEqual(new Set(['list', 'watch'])),
      );
    // afterEach: and nothing refused.
  });

  it('lists in pages, following the continue token to the last page', async () => {
    for (let i = 0; i < 250; i++)
      kube.store.create('services', 'default', {
        metadata: { name: `s-${i}` },
        spec: { ports: [{ port: 80 }] },
      });
    const http = new KubeApiClient(kube.kubeConfig({ as: rbac.forwarder }));
    const first = await listPage(http, '/api/v1/services', 100, undefined);
    const second = await listPage(http, '/api/v1/services', 100, first.metadata?._continue);
    const third = await listPage(http, '/api/v1/services', 100, second.metadata?._continue);
    http.close();
    expect([first.items.length, second.items.length, third.items.length]).toEqual([100, 100, 50]);
    expect(first.metadata?._continue).toBeTruthy();
    expect(third.metadata?._continue).toBeUndefined();
    await startForwarder();
    expect(forwarder.services.size).toBe(250);
  });

  it('serves /healthz, /readyz once both lists are done, and Prometheus /metrics', async () => {
    await startForwarder();
    const port = await forwarder.listen(0, '127.0.0.1');
    const get = (path: string) => fetch(`http://127.0.0.1:${port}${path}`);
    expect((await get('/healthz')).status).toBe(200);
    expect((await get('/readyz')).status).toBe(200);
    const metrics = await (await get('/metrics')).text();
    expect(metrics).toContain('# TYPE forwarder_messages_forwarded_total counter');
    expect(metrics).toMatch(/forwarder_buffer_depth \d+/);
    expect(metrics).toContain('forwarder_watch_restarts_total{resource="services"}');
  });
});

/** An HTTP pass-through to `target` that holds every request until opened. */
async function startGate(target: string) {
  const held: (() => void)[] = [];
  let isOpen = false;
  const server = createServer((req, res) => {
    const forward = () => {
      const upstream = request(
        `${target}${req.url ?? '/'}`,
        { method: req.method, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      req.pipe(upstream);
    };
    if (isOpen) forward();
    else held.push(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get held() {
      return held.length;
    },
    open: () => {
      isOpen = true;
      for (const forward of held.splice(0)) forward();
    },
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

describe('forwarder process', () => {
  it('delivers its pending buffer on SIGTERM before it exits', async () => {
    // The process talks to moto's default account, so this test uses its own queue there.
    const endpoint = inject('awsEndpoint');
    const plain = new SQSClient({
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    });
    const url =
      (await plain.send(new CreateQueueCommand({ QueueName: `sigterm-${Date.now()}` }))).QueueUrl ??
      '';
    // SQS is reached through a gate held closed until the signal, so the buffer is full then.
    const gate = await startGate(endpoint);
    const dir = mkdtempSync(join(tmpdir(), 'fwd-'));
    // As in a Pod: the API server over HTTPS, the ServiceAccount's token and CA on disk.
    const front = await startInClusterFront(kube.url, {
      upstreamToken: kube.tokenFor(rbac.forwarder),
    });
    const names = Array.from({ length: 50 }, (_, i) => `svc-${i}`);
    for (const name of names)
      kube.store.create('services', 'default', loadBalancerService(name) as never);
    // The bundle the Deployment runs from its ConfigMap, with plain node.
    const bundle = join(dir, 'main.mjs');
    await buildForwarder(bundle);
    expect(statSync(bundle).size).toBeLessThan(forwarderBundleLimitBytes);
    const child = spawn(process.execPath, [bundle], {
      env: {
        PATH: process.env.PATH ?? '',
        ...front.env,
        AWS_ACCESS_KEY_ID: 'testing',
        AWS_SECRET_ACCESS_KEY: 'testing',
        CONTROLLER_CONFIG: JSON.stringify({
          clusterName: 'c1',
          region: 'us-east-1',
          claimClassless: true,
          queueUrl: url,
          sqsEndpoint: gate.url,
          port: 0,
          // Unrelated settings of the shared configuration are ignored by the forwarder.
          tableName: 'state',
        }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    try {
      await vi.waitFor(() => expect(gate.held).toBeGreaterThan(0), { timeout: 15_000 });
      // The first held send may be the heartbeat sent at start: wait until the initial lists
      // are done (/readyz), so every Service is in the buffer when the signal comes.
      await vi.waitFor(
        async () => {
          const port = /"message":"forwarder started".*?"port":(\d+)/.exec(output)?.[1];
          expect(port).toBeDefined();
          expect((await fetch(`http://127.0.0.1:${port ?? 0}/readyz`)).status).toBe(200);
        },
        { timeout: 15_000 },
      );
      child.kill('SIGTERM');
      await vi.waitFor(() => expect(output).toContain('stopping: delivering what is pending'));
      gate.open();
      // 'close', not 'exit': stdout may still hold the last lines when the process has exited.
      const [code] = (await once(child, 'close')) as [number];
      expect(code, output).toBe(0);
      // The 50 Services and the heartbeat sent at start.
      expect(Number(/"pending":(\d+)/.exec(output)?.[1] ?? 0), output).toBe(names.length + 1);
      expect(output).toMatch(/"message":"stopped".*"undelivered":0/);
    } finally {
      child.kill('SIGKILL');
      gate.close();
      await front.close();
    }
    const keys = new Set<string>();
    for (;;) {
      const page = await plain.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 0,
          VisibilityTimeout: 300,
        }),
      );
      if ((page.Messages ?? []).length === 0) break;
      for (const m of page.Messages ?? []) {
        const body = JSON.parse(m.Body ?? '{}') as { kind: string; key: string };
        if (body.kind !== 'heartbeat') keys.add(body.key);
      }
    }
    expect([...keys].sort()).toEqual(names.map((n) => `default/${n}`).sort());
  }, 30_000);
});
