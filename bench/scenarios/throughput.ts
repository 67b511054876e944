/**
 * The pipeline end to end on one machine, with real parts: the fake Kubernetes API server over
 * HTTP, the forwarder (in process), SQS, DynamoDB, ELBv2 and EC2 in moto, and the real runtime
 * (processWorkBatch) in as many function instances as the event source mapping's maximum
 * concurrency allows, each with its own SDK clients (and so its own per-process rate limiter).
 * The event source mapping is emulated by pollers that long-poll the queue (batches of 10),
 * invoke processWorkBatch and delete what succeeded.
 *
 * Phases, each a burst of N Service events written to the API server at once: create, update (an
 * annotation change), one node added (fan-out to N host updates), delete. Measured per phase:
 * events per second, end-to-end latency (API write → NLB ready / synced / targets registered /
 * Service gone), sync latency (one sync pass, the runtime's SyncLatency metric), and every AWS
 * call, which the cost section prices.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { parseConfig } from '../../functions/contract/controller-config';
import { readNlbState } from '../../functions/nlb/nlb-state';
import { Forwarder } from '../../functions/forwarder/forwarder';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import type { StoredObject, WatchEvent } from '../../functions/local/fake-kube/store';
import { eventSourceMaxConcurrency } from '../../functions/contract/queue-limits';
import type { WiredRuntime } from '../../functions/wiring/wiring';
import type { RuntimeLog, RuntimeMetrics } from '../../functions/runtime/ports';
import { processWorkBatch } from '../../functions/runtime/work-batch';
import { type QueueRecord } from '../../functions/runtime/queue-records';
import { createRuntime } from '../../functions/wiring/wiring';
import { createAwsCluster } from '../../kit/aws-cluster';
import { MotoAccount } from '../../kit/moto';
import { CallLog, InMemoryLoadBalancerProvider } from '../../kit/in-memory';
import { AwsMeter, type MeteredCall } from '../support/aws-meter';
import { percentile, round, sum } from '../support/stats';
import { serviceLeasePrefix, servicePrefix } from '../../functions/state/table-layout';

export type PhaseName = 'create' | 'update' | 'node added' | 'delete';

export interface PhaseResult {
  readonly phase: PhaseName;
  /** Service events written to the API server (for `node added`: one node event, N host updates). */
  readonly events: number;
  /** Syncs that did the work (for `node added`: host updates). */
  readonly syncs: number;
  readonly wallSeconds: number;
  readonly eventsPerSecond: number;
  readonly e2eP50Ms: number;
  readonly e2eP99Ms: number;
  readonly e2eMaxMs: number;
  readonly syncP50Ms: number;
  readonly syncP99Ms: number;
  readonly invocations: number;
  /** Sum of the invocations' durations (what Lambda bills). */
  readonly lambdaMs: number;
  readonly emptyReceives: number;
  /** `Service.Operation` → calls, AWS only. */
  readonly calls: Record<string, number>;
  readonly rru: number;
  readonly wru: number;
  /** Write units by what was written: `Operation item-kind` (the key's prefix), per phase. */
  readonly wruByItem: Record<string, number>;
  readonly kubeRequests: number;
  /** Mean duration of one call to moto (ELBv2/EC2/SQS/DynamoDB), to judge how much moto weighs. */
  readonly motoCallMs: number;
}

export interface ThroughputResult {
  readonly backend: string;
  readonly provider: 'moto' | 'in-memory';
  readonly services: number;
  readonly concurrency: number;
  readonly memoryMiB: number;
  /** Median size of a Service's record item after its create (bytes, DynamoDB's way of counting). */
  readonly serviceItemBytes: number;
  /** Median size of a Service's lease item after its create (absent from runs before the split). */
  readonly leaseItemBytes?: number;
  readonly phases: PhaseResult[];
}

interface Timed {
  readonly at: number;
  readonly key: string;
}

class Recorder implements RuntimeLog, RuntimeMetrics {
  readonly synced: Timed[] = [];
  readonly syncLatency: { at: number; ms: number }[] = [];
  readonly warnings: string[] = [];
  info(message: string, fields: Record<string, unknown> = {}) {
    if (message === 'synced') {
      this.synced.push({ at: performance.now(), key: String(fields.serviceKey) });
    }
  }
  warn(message: string, fields: Record<string, unknown> = {}) {
    this.warnings.push(`${message} ${JSON.stringify(fields)}`);
  }
  error(message: string, fields: Record<string, unknown> = {}) {
    this.warnings.push(`error: ${message} ${JSON.stringify(fields)}`);
  }
  count() {}
  milliseconds(name: string, value: number) {
    if (name === 'SyncLatency') this.syncLatency.push({ at: performance.now(), ms: value });
  }
}

function serviceBody(i: number) {
  return {
    metadata: { name: `svc-${i}`, namespace: 'bench' },
    spec: {
      type: 'LoadBalancer',
      selector: { app: `app-${i}` },
      ports: [
        { name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 },
        { name: 'https', protocol: 'TCP', port: 443, targetPort: 8443 },
      ],
    },
  };
}

const nameOf = (object: StoredObject) => {
  const name = object.metadata.name;
  return typeof name === 'string' ? name : '';
};

const hostnameOf = (object: StoredObject) => {
  const status = object.status as
    { loadBalancer?: { ingress?: { hostname?: string }[] } } | undefined;
  return status?.loadBalancer?.ingress?.[0]?.hostname ?? '';
};

export async function throughput(
  endpoint: string,
  options: {
    services: number;
    timeoutSeconds?: number;
    /**
     * `moto`: the real NLB provider against moto. `in-memory`: the provider port served by
     * test/support's InMemoryLoadBalancerProvider (no ELBv2/EC2 calls at all), SQS and DynamoDB
     * still on moto; the node phase is left out (see the propagation section for host updates).
     */
    provider?: 'moto' | 'in-memory';
    /**
     * Only the create phase, with the shared registration budget off (registrations wait on each
     * instance's own limiter, as in release 0.1): what the budget costs a create burst.
     */
    createWithoutBudget?: boolean;
  },
): Promise<ThroughputResult> {
  const inMemory = options.provider === 'in-memory';
  const fakeCloud = new InMemoryLoadBalancerProvider(new CallLog());
  const n = options.services;
  const timeoutMs = (options.timeoutSeconds ?? 240) * 1000;
  const account = new MotoAccount(endpoint);
  const aws = await createAwsCluster(3, endpoint, account);
  const meter = new AwsMeter();
  const sqs = meter.attach(account.client(SQSClient));
  const queueUrl =
    (
      await sqs.send(
        new CreateQueueCommand({
          QueueName: 'bench-work',
          // As the stack: six times the sync function's 60 s timeout.
          Attributes: { VisibilityTimeout: '360' },
        }),
      )
    ).QueueUrl ?? '';
  await account.client(DynamoDBClient).send(
    new CreateTableCommand({
      TableName: 'bench-state',
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    }),
  );
  const kube = await FakeKubeApiServer.start();
  const dir = mkdtempSync(join(tmpdir(), 'bench-throughput-'));
  const kubeconfigPath = join(dir, 'kubeconfig');
  writeFileSync(kubeconfigPath, kube.kubeconfigText());
  for (const host of aws.hosts) {
    kube.store.create('nodes', '', {
      metadata: { name: host.name },
      spec: { providerID: host.providerID },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    });
  }
  const config = parseConfig({
    clusterName: aws.settings.clusterName,
    region: 'us-east-1',
    claimClassless: true,
    queueUrl,
    tableName: 'bench-state',
    aws: {
      vpcId: aws.vpcId,
      backendSecurityGroupId: aws.settings.backendSecurityGroupId,
      endpoints: {
        elbv2: endpoint,
        ec2: endpoint,
        tagging: endpoint,
        sqs: endpoint,
        dynamodb: endpoint,
      },
    },
    kubernetes: { mode: 'kubeconfig', path: kubeconfigPath },
    ...(options.createWithoutBudget === true ? { registrationBudget: { perSecond: 0 } } : {}),
  });
  const recorder = new Recorder();
  const concurrency = eventSourceMaxConcurrency(config.elbv2CallsPerSecond);
  const runtimes: WiredRuntime[] = Array.from({ length: concurrency }, () => {
    const runtime = createRuntime(config, {
      credentials: account.config.credentials,
      log: recorder,
      metrics: recorder,
      adaptClient: (client) => meter.attach(account.bind(client)),
    });
    return inMemory
      ? { ...runtime, syncDeps: { ...runtime.syncDeps, provider: fakeCloud } }
      : runtime;
  });
  const forwarder = new Forwarder({
    kubeConfig: kube.kubeConfig(),
    claim: { loadBalancerClass: config.loadBalancerClass, claimClassless: config.claimClassless },
    nodePolicy: config.nodePolicy,
    send: (messages) => runtimes[0]!.queue.send(messages),
  });

  const watched: WatchEvent[] = [];
  const watchedAt: number[] = [];
  const unsubscribe = kube.store.subscribe(kube.store.currentRevision, (event) => {
    if (event.resource !== 'services') return;
    watched.push(event);
    watchedAt.push(performance.now());
  });

  const invocations: { at: number; ms: number }[] = [];
  const emptyReceives: number[] = [];
  let running = true;
  const pollers = runtimes.map(async (runtime) => {
    while (running) {
      try {
        const received = await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
            MessageSystemAttributeNames: ['ApproximateReceiveCount'],
          }),
        );
        const records: QueueRecord[] = (received.Messages ?? []).map((m) => ({
          messageId: m.MessageId ?? '',
          body: m.Body ?? '',
          receiptHandle: m.ReceiptHandle ?? '',
          receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? '1'),
        }));
        if (records.length === 0) {
          emptyReceives.push(performance.now());
          continue;
        }
        const started = performance.now();
        const result = await processWorkBatch(records, runtime);
        invocations.push({ at: started, ms: performance.now() - started });
        const failed = new Set(result.batchItemFailures.map((f) => f.itemIdentifier));
        const done = records.filter((r) => !failed.has(r.messageId));
        if (done.length > 0) {
          await sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: queueUrl,
              Entries: done.map((r, i) => ({ Id: String(i), ReceiptHandle: r.receiptHandle })),
            }),
          );
        }
      } catch (error) {
        if (!running) return;
        recorder.warn('bench poller failed', { error: String(error) });
        await sleep(500);
      }
    }
  });

  const waitFor = async (
    what: string,
    done: () => boolean | Promise<boolean>,
    everyMs = 20,
  ): Promise<void> => {
    const deadline = performance.now() + timeoutMs;
    while (!(await done())) {
      if (performance.now() > deadline) {
        throw new Error(
          `throughput: ${what} did not finish in ${timeoutMs / 1000} s; last warnings:\n${recorder.warnings.slice(-5).join('\n')}`,
        );
      }
      await sleep(everyMs);
    }
  };

  /**
   * Runs one phase: `act` writes the events and waits for their completion; counts cover
   * everything from its start until the queue is quiet again (trailing lease releases, deletes).
   */
  const phase = async (
    name: PhaseName,
    events: number,
    syncs: number,
    act: (started: number) => Promise<{ ended: number; e2e: number[] }>,
  ): Promise<PhaseResult> => {
    const callMark = meter.calls.length;
    const requestMark = kube.requests.length;
    const started = performance.now();
    const { ended, e2e } = await act(started);
    await quiet(() => invocations.length);
    const countEnd = performance.now();
    const inWindow = (at: number) => at >= started && at <= countEnd;
    const calls: MeteredCall[] = meter.since(callMark).filter((c) => inWindow(c.at + c.ms));
    const byOperation: Record<string, number> = {};
    for (const c of calls) {
      if (c.operation === 'ReceiveMessage' && c.messages === 0) continue;
      const key = `${c.service}.${c.operation}`;
      byOperation[key] = (byOperation[key] ?? 0) + 1;
    }
    const lambda = invocations.filter((i) => inWindow(i.at));
    const syncLatency = recorder.syncLatency.filter((s) => inWindow(s.at)).map((s) => s.ms);
    const wallSeconds = (ended - started) / 1000;
    const moto = calls.filter((c) => c.operation !== 'ReceiveMessage');
    return {
      phase: name,
      events,
      syncs,
      wallSeconds: round(wallSeconds, 2),
      eventsPerSecond: round((name === 'node added' ? syncs : events) / wallSeconds, 2),
      e2eP50Ms: round(percentile(e2e, 50), 0),
      e2eP99Ms: round(percentile(e2e, 99), 0),
      e2eMaxMs: round(Math.max(...e2e), 0),
      syncP50Ms: round(percentile(syncLatency, 50), 0),
      syncP99Ms: round(percentile(syncLatency, 99), 0),
      invocations: lambda.length,
      lambdaMs: round(sum(lambda.map((i) => i.ms)), 0),
      emptyReceives: emptyReceives.filter(inWindow).length,
      calls: byOperation,
      rru: sum(calls.map((c) => c.rru)),
      wru: sum(calls.map((c) => c.wru)),
      wruByItem: writeUnitsByItem(calls),
      kubeRequests: kube.requests.length - requestMark,
      motoCallMs: round(sum(moto.map((c) => c.ms)) / Math.max(1, moto.length), 1),
    };
  };

  const keys = Array.from({ length: n }, (_, i) => `bench/svc-${i}`);
  const phases: PhaseResult[] = [];
  let serviceItemBytes: number | undefined;
  let leaseItemBytes: number | undefined;
  try {
    forwarder.start();
    await waitFor('the forwarder start', () => forwarder.ready);
    // Steady state, as within a minute of a deploy: node sync (the forwarder's first Node
    // messages, or the schedule) has stored the eligible host set before Services arrive. Without
    // this, every create of the first batches would work the set out and store it again, a
    // one-off the per-event figures must not carry.
    await waitFor(
      'the first node sync',
      async () => (await runtimes[0]!.store.getEligibleHosts()) !== undefined,
      200,
    );
    // Node sync may have delayed a second trigger (its minimum interval): wait for it too.
    const counts = [
      'ApproximateNumberOfMessages',
      'ApproximateNumberOfMessagesNotVisible',
      'ApproximateNumberOfMessagesDelayed',
    ] as const;
    await waitFor(
      'draining the queue before the create phase',
      async () => {
        const { Attributes } = await sqs.send(
          new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: [...counts] }),
        );
        return counts.every((name) => Number(Attributes?.[name] ?? '0') === 0);
      },
      200,
    );
    await quiet(() => invocations.length);

    // Create: every Service until its status carries the NLB's DNS name.
    phases.push(
      await phase('create', n, n, async () => {
        const watchMark = watched.length;
        const writtenAt = new Map<string, number>();
        for (let i = 0; i < n; i++) {
          writtenAt.set(keys[i]!, performance.now());
          kube.store.create('services', 'bench', serviceBody(i));
        }
        const readyAt = new Map<string, number>();
        await waitFor('create', () => {
          for (let i = watchMark; i < watched.length; i++) {
            const event = watched[i]!;
            const key = `${event.namespace}/${nameOf(event.object)}`;
            if (hostnameOf(event.object) !== '' && !readyAt.has(key)) {
              readyAt.set(key, watchedAt[i]!);
            }
          }
          return readyAt.size >= n;
        });
        return {
          ended: Math.max(...readyAt.values()),
          e2e: keys.map((k) => readyAt.get(k)! - writtenAt.get(k)!),
        };
      }),
    );

    serviceItemBytes = percentile(meter.itemSizes(servicePrefix), 50);
    leaseItemBytes = percentile(meter.itemSizes(serviceLeasePrefix), 50);

    if (options.createWithoutBudget !== true) {
      // Update: an annotation change (a needsUpdate field) on every Service, until each is synced again.
      phases.push(
        await phase('update', n, n, async () => {
          const syncedMark = recorder.synced.length;
          const writtenAt = new Map<string, number>();
          for (let i = 0; i < n; i++) {
            writtenAt.set(keys[i]!, performance.now());
            kube.store.patch('services', 'bench', `svc-${i}`, 'merge', {
              metadata: { annotations: { 'bench.example.com/revision': '2' } },
            });
          }
          const syncedAt = new Map<string, number>();
          await waitFor('update', () => {
            for (const s of recorder.synced.slice(syncedMark)) {
              if (!syncedAt.has(s.key)) syncedAt.set(s.key, s.at);
            }
            return syncedAt.size >= n;
          });
          return {
            ended: Math.max(...syncedAt.values()),
            e2e: keys.map((k) => syncedAt.get(k)! - writtenAt.get(k)!),
          };
        }),
      );

      // One node added: until every Service's target groups have registered it.
      if (!inMemory) await nodeAdded();

      // Delete: until every Service is gone from the API (finalizer released after the NLB is deleted).
      phases.push(
        await phase('delete', n, n, async () => {
          const watchMark = watched.length;
          const writtenAt = new Map<string, number>();
          for (let i = 0; i < n; i++) {
            writtenAt.set(keys[i]!, performance.now());
            kube.store.delete('services', 'bench', `svc-${i}`);
          }
          const goneAt = new Map<string, number>();
          await waitFor('delete', () => {
            for (let i = watchMark; i < watched.length; i++) {
              const event = watched[i]!;
              if (event.type !== 'DELETED') continue;
              goneAt.set(`${event.namespace}/${nameOf(event.object)}`, watchedAt[i]!);
            }
            return goneAt.size >= n;
          });
          return {
            ended: Math.max(...goneAt.values()),
            e2e: keys.map((k) => goneAt.get(k)! - writtenAt.get(k)!),
          };
        }),
      );
    }
  } finally {
    running = false;
    unsubscribe();
    await forwarder.stop(2_000).catch(() => undefined);
    await Promise.all(pollers);
    await kube.stop();
  }

  async function nodeAdded(): Promise<void> {
    const [host] = await aws.addHosts(1);
    if (host === undefined) throw new Error('throughput: no instance started');
    const groupsOf = new Map<string, string>();
    for (const key of keys) {
      const record = await runtimes[0]!.store.getService(key);
      for (const tg of Object.values(readNlbState(record?.provider).targetGroups ?? {})) {
        groupsOf.set(tg.arn, key);
      }
    }
    phases.push(
      await phase('node added', 1, n, async (started) => {
        const callMark = meter.calls.length;
        kube.store.create('nodes', '', {
          metadata: { name: host.name },
          spec: { providerID: host.providerID },
          status: { conditions: [{ type: 'Ready', status: 'True' }] },
        });
        const registeredAt = new Map<string, number>();
        await waitFor('node added', () => {
          for (const c of meter.since(callMark)) {
            if (c.operation !== 'RegisterTargets' || !c.ok) continue;
            const targets = (c.input.Targets ?? []) as { Id?: string }[];
            if (!targets.some((t) => t.Id === host.instanceId)) continue;
            const arn = String(c.input.TargetGroupArn);
            if (!registeredAt.has(arn)) registeredAt.set(arn, c.at + c.ms);
          }
          return [...groupsOf.keys()].every((arn) => registeredAt.has(arn));
        });
        const perService = new Map<string, number>();
        for (const [arn, key] of groupsOf) {
          perService.set(key, Math.max(perService.get(key) ?? 0, registeredAt.get(arn)!));
        }
        return {
          ended: Math.max(...perService.values()),
          e2e: [...perService.values()].map((at) => at - started),
        };
      }),
    );
  }

  return {
    backend: inMemory
      ? 'in-memory provider (test/support InMemoryLoadBalancerProvider: no ELBv2/EC2 calls) + moto 5.2.1 (SQS, DynamoDB) + fake Kubernetes API server over HTTP, all on this machine'
      : 'moto 5.2.1 (SQS, DynamoDB, ELBv2, EC2, tagging) + fake Kubernetes API server over HTTP, all on this machine',
    provider: inMemory ? 'in-memory' : 'moto',
    services: n,
    concurrency,
    memoryMiB: 512,
    serviceItemBytes: serviceItemBytes ?? Number.NaN,
    leaseItemBytes: leaseItemBytes ?? Number.NaN,
    phases,
  };
}

/** Waits until no invocation has ended for a second. */
async function quiet(count: () => number): Promise<void> {
  let last = count();
  for (;;) {
    await sleep(1000);
    const now = count();
    if (now === last) return;
    last = now;
  }
}

/** Which items the write units went to: the operation and the key's prefix (`svc#`, `svclease#`…). */
function writeUnitsByItem(calls: readonly MeteredCall[]): Record<string, number> {
  const by: Record<string, number> = {};
  for (const c of calls) {
    if (c.wru === 0) continue;
    // A transaction is filed under its first entry's item.
    const first = (
      c.input.TransactItems as Record<string, Record<string, unknown>>[] | undefined
    )?.[0];
    const entry = first === undefined ? undefined : Object.values(first)[0];
    const item = (c.input.Key ?? c.input.Item ?? entry?.Key ?? entry?.Item) as
      { pk?: unknown } | undefined;
    const prefix =
      typeof item?.pk === 'string' ? (/^[a-z]+#/.exec(item.pk)?.[0] ?? item.pk) : 'batch';
    const name = `${c.operation} ${prefix}`;
    by[name] = (by[name] ?? 0) + c.wru;
  }
  return by;
}
