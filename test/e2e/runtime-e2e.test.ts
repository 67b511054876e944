import {
  DeleteTargetGroupCommand,
  DescribeListenersCommand,
  DescribeLoadBalancersCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { ChangeMessageVisibilityCommand } from '@aws-sdk/client-sqs';
import { ApiException, CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { serviceLeasePk, servicePk } from '../../functions/state/table-layout';
import { readNlbState } from '../../functions/nlb/nlb-state';
import { upstreamFinalizer } from '../../functions/core/claim';
import { runNodeSync } from '../../functions/runtime/node-sync';
import { runSweep } from '../../functions/runtime/sweep';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { throttledRequeueSeconds } from '../../functions/aws/aws-errors';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const key = 'default/web';

let world: RuntimeWorld;

beforeEach(async () => {
  world = await createRuntimeWorld();
});

afterEach(async () => {
  await world.stop();
});

async function recordOf() {
  return world.runtime.store.getService(key);
}

async function loadBalancer() {
  const state = readNlbState((await recordOf())?.provider);
  const elbv2 = world.aws.testClients.elbv2;
  const lb = (
    await elbv2.send(
      new DescribeLoadBalancersCommand({ LoadBalancerArns: [state.loadBalancerArn ?? ''] }),
    )
  ).LoadBalancers?.[0];
  const listeners =
    (await elbv2.send(new DescribeListenersCommand({ LoadBalancerArn: state.loadBalancerArn })))
      .Listeners ?? [];
  const groups = Object.values(state.targetGroups ?? {});
  const targets: Record<number, string[]> = {};
  for (const tg of groups) {
    const described = await elbv2.send(
      new DescribeTargetGroupsCommand({ TargetGroupArns: [tg.arn] }),
    );
    const health = await elbv2.send(new DescribeTargetHealthCommand({ TargetGroupArn: tg.arn }));
    targets[described.TargetGroups?.[0]?.Port ?? 0] = (health.TargetHealthDescriptions ?? [])
      .map((d) => d.Target?.Id ?? '')
      .sort();
  }
  return { lb, listeners: listeners.map((l) => `${l.Protocol}:${l.Port}`).sort(), targets, state };
}

describe('the serverless runtime end to end (moto + fake API server)', () => {
  it('creates the NLB, adds the finalizer, writes the status hostname and records Events', async () => {
    await world.createService();
    const service = await world.api.readNamespacedService({ name: 'web', namespace: 'default' });
    const { lb, listeners } = await loadBalancer();
    expect(service.metadata?.finalizers).toEqual([upstreamFinalizer]);
    expect(service.status?.loadBalancer?.ingress?.[0]?.hostname).toBe(lb?.DNSName?.toLowerCase());
    expect(listeners).toEqual(['TCP:443', 'TCP:80']);
    const events = await world.api.listNamespacedEvent({ namespace: 'default' });
    expect(events.items.map((e) => `${e.reason}/${e.source?.component}`).sort()).toEqual([
      'EnsuredLoadBalancer/service-controller',
      'EnsuringLoadBalancer/service-controller',
    ]);
    expect(world.metrics.get('Syncs{outcome=done,kind=service}')).toBe(1);
  });

  it('updates listeners and target groups when the ports change', async () => {
    await world.createService();
    await world.api.patchNamespacedService(
      {
        name: 'web',
        namespace: 'default',
        body: {
          spec: { ports: [{ name: 'http', protocol: 'TCP', port: 8080, targetPort: 8080 }] },
        },
      },
      merge,
    );
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    const { listeners, targets } = await loadBalancer();
    expect(listeners).toEqual(['TCP:8080']);
    expect(Object.keys(targets)).toHaveLength(1);
  });

  it('updates targets when a node joins and when one leaves, through node sync and host updates', async () => {
    await world.createService();
    const added = await world.addNode();
    await world.send({ v: 1, kind: 'node', reason: 'node added' });
    await world.drain();
    let { targets } = await loadBalancer();
    expect(Object.values(targets).every((ids) => ids.includes(added.instanceId))).toBe(true);
    expect(Object.values(targets)[0]).toHaveLength(4);

    world.kube.store.delete('nodes', '', world.aws.hosts[0]!.name);
    await world.send({ v: 1, kind: 'node', reason: 'node deleted' });
    await world.drain();
    ({ targets } = await loadBalancer());
    expect(
      Object.values(targets).every((ids) => !ids.includes(world.aws.hosts[0]!.instanceId)),
    ).toBe(true);
  });

  it('deletes everything and releases the finalizer when the Service is deleted', async () => {
    await world.createService();
    await world.api.deleteNamespacedService({ name: 'web', namespace: 'default' });
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    expect(await world.aws.ownedResources()).toEqual([]);
    await expect(
      world.api.readNamespacedService({ name: 'web', namespace: 'default' }),
    ).rejects.toMatchObject({ code: 404 });
    // The record leaves a tombstone (removed by TTL); the lease item goes at once.
    const tombstone = await world.runtime.store.getItem(servicePk(key));
    expect(tombstone?.recz).toBeUndefined();
    expect(tombstone?.uid).toBeUndefined();
    expect(tombstone?.expiresAt).toBeDefined();
    expect(await world.runtime.store.getItem(serviceLeasePk(key))).toBeUndefined();
  });

  it('deletes the old NLB and creates a new one when the Service is re-created with the same name', async () => {
    await world.createService();
    const before = (await loadBalancer()).state.loadBalancerArn;
    const current = await world.api.readNamespacedService({ name: 'web', namespace: 'default' });
    // Someone strips the finalizer and re-creates the Service while the controller is away.
    await world.api.patchNamespacedService(
      { name: 'web', namespace: 'default', body: { metadata: { finalizers: null } } },
      merge,
    );
    await world.api.deleteNamespacedService({ name: 'web', namespace: 'default' });
    await world.api.createNamespacedService({
      namespace: 'default',
      body: loadBalancerService('web'),
    });
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    const after = await loadBalancer();
    expect(after.state.loadBalancerArn).not.toBe(before);
    expect((await recordOf())?.uid).not.toBe(current.metadata?.uid);
    expect(await world.aws.ownedResources()).toHaveLength(4);
  });

  it('backs off an ELBv2 failure by base, then 2·base, then succeeds and resets the failure count', async () => {
    await world.api.createNamespacedService({
      namespace: 'default',
      body: loadBalancerService('web'),
    });
    world.aws.recorder.injectFault({
      operation: 'CreateLoadBalancer',
      kind: 'server-error',
      times: 10,
    });
    await world.send({ v: 1, kind: 'service', key });

    const first = await world.handleOnce();
    expect(first.result.batchItemFailures).toHaveLength(1);
    expect((await world.runtime.store.getItem(serviceLeasePk(key)))?.failures).toBe(1);
    // A failed pass may have changed AWS: its lease says the checkpoint is not to be trusted.
    expect((await world.runtime.store.getItem(serviceLeasePk(key)))?.unverified).toBe(true);
    expect(await world.receive(0)).toEqual([]); // invisible for 1 s
    const second = await world.handleOnce(3);
    expect(second.records[0]?.receiveCount).toBe(2);
    expect((await world.runtime.store.getItem(serviceLeasePk(key)))?.failures).toBe(2);

    world.aws.recorder.clearFaults();
    expect(await world.receive(1)).toEqual([]); // 2 s now: not back after 1 s
    const third = await world.handleOnce(3);
    expect(third.records[0]?.receiveCount).toBe(3);
    expect(third.result.batchItemFailures).toEqual([]);
    expect((await world.runtime.store.getItem(serviceLeasePk(key)))?.failures).toBe(0);
    expect((await world.runtime.store.getItem(serviceLeasePk(key)))?.unverified).toBeUndefined();
  });

  it('replaces a much-retried message with a fresh delayed one, so throttling never reaches the DLQ', async () => {
    await world.api.createNamespacedService({
      namespace: 'default',
      body: loadBalancerService('web'),
    });
    world.aws.recorder.injectFault({
      operation: 'CreateLoadBalancer',
      kind: 'throttle',
      times: 10,
    });
    await world.send({ v: 1, kind: 'service', key });
    const [record] = await world.receive(1);
    const result = await world.handle([{ ...record!, receiveCount: 8 }]);
    expect(result.batchItemFailures).toEqual([]);
    expect(await world.queueDepth()).toMatchObject({ visible: 0, delayed: 1 });
    // Throttling is no failure (issue 37): the pass comes back in a moment, uncounted.
    expect(world.metrics.get('Retries')).toBe(0);
    const requeued = world.log.lines.filter((l) => l.message === 'sync requeued');
    expect(requeued.map((l) => l.fields.seconds)).toEqual([throttledRequeueSeconds]);
  });

  it('runs as the functions under the RBAC of infra/k8s: every request of a sync is theirs, and a call outside the ClusterRole is refused', async () => {
    await world.createService();
    const functions = world.rbac?.functions;
    expect(functions).toBeDefined();
    const theirs = new Set(
      world.kube.requests
        .filter((r) => r.user === functions?.name)
        .map((r) => `${r.method} ${r.path}`),
    );
    expect([...theirs]).toEqual(
      expect.arrayContaining([
        'GET /api/v1/namespaces/default/services/web',
        'PATCH /api/v1/namespaces/default/services/web',
        'PATCH /api/v1/namespaces/default/services/web/status',
        'POST /api/v1/namespaces/default/events',
      ]),
    );
    // Everything else was the test's own admin client.
    expect(world.kube.requests.every((r) => r.user === functions?.name || r.user === 'admin')).toBe(
      true,
    );

    const node = world.aws.hosts[0]!.name;
    const asFunctions = world.kube.kubeConfig({ as: functions }).makeApiClient(CoreV1Api);
    const refused = await asFunctions.deleteNode({ name: node }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ApiException);
    expect((refused as ApiException<unknown>).code).toBe(403);
    expect(world.kube.denials.map((d) => d.message)).toEqual([
      `nodes "${node}" is forbidden: User "${functions?.name}" cannot delete resource "nodes" in API group "" at the cluster scope`,
    ]);
    expect(world.kube.store.get('nodes', '', node)).toBeDefined();
    // That refusal was the point; world.stop() fails on any other.
    world.kube.denials.length = 0;
  });

  it('counts AWS calls by operation in the metrics', async () => {
    await world.createService();
    expect(
      world.metrics.get('AwsCalls{awsService=ElasticLoadBalancingV2,operation=CreateLoadBalancer}'),
    ).toBe(1);
    expect(
      world.metrics.get('AwsCalls{awsService=ElasticLoadBalancingV2,operation=CreateListener}'),
    ).toBe(2);
  });

  it('never runs two syncs of one key at once; a message during a sync gets one more pass and no failure, and comes back when the lease runs out', async () => {
    await world.api.createNamespacedService({
      namespace: 'default',
      body: loadBalancerService('web'),
    });
    await world.send({ v: 1, kind: 'service', key });
    await world.send({ v: 1, kind: 'service', key });
    const records = [...(await world.receive(1)), ...(await world.receive(1))];
    expect(records).toHaveLength(2);
    // Two concurrent invocations, one message each.
    const [a, b] = await Promise.all([world.handle([records[0]!]), world.handle([records[1]!])]);
    expect(world.metrics.get('BusyKeys')).toBe(1);
    // The holder ran a second pass for the busy message.
    const passes = world.log.lines.filter(
      (l) => l.message === 'synced' && l.fields.serviceKey === key,
    );
    expect(passes.map((l) => l.fields.pass)).toEqual([1, 2]);
    expect((await world.runtime.store.getItem(serviceLeasePk(key)))?.failures ?? 0).toBe(0);
    expect(world.aws.recorder.count('CreateLoadBalancer')).toBe(1);
    // The busy message is not acknowledged: it waits out the lease it found (had its holder
    // died, nothing else would run the key), then finds the key free and the work done.
    const failed = [...a.batchItemFailures, ...b.batchItemFailures];
    expect(failed).toHaveLength(1);
    const busy = world.log.lines.find(
      (l) => l.message === 'key is busy; the holder will run again',
    );
    expect(busy?.fields.comesBackIn).toBeGreaterThan(world.config.leaseSeconds - 5);
    expect(busy?.fields.comesBackIn).toBeLessThanOrEqual(world.config.leaseSeconds + 1);
    expect(await world.receive(0)).toEqual([]);
    const back = records.find((r) => r.messageId === failed[0]?.itemIdentifier)!;
    // The lease's time, skipped: the message is made visible as its expiry would.
    await world.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: world.config.queueUrl,
        ReceiptHandle: back.receiptHandle,
        VisibilityTimeout: 0,
      }),
    );
    world.aws.recorder.reset();
    await world.drain();
    expect(world.aws.recorder.count(undefined, 'ElasticLoadBalancingV2')).toBe(0);
    expect(await world.queueDepth()).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
  });

  it('restores a target group deleted by hand on the next sweep', async () => {
    await world.createService();
    const { state } = await loadBalancer();
    const group = Object.values(state.targetGroups ?? {})[0]!;
    const listeners = await world.aws.testClients.elbv2.send(
      new DescribeListenersCommand({ LoadBalancerArn: state.loadBalancerArn }),
    );
    // AWS refuses to delete a group in use; a person deletes its listener first, then the group.
    const listener = listeners.Listeners?.find(
      (l) => l.DefaultActions?.[0]?.TargetGroupArn === group.arn,
    );
    const { DeleteListenerCommand } = await import('@aws-sdk/client-elastic-load-balancing-v2');
    await world.aws.testClients.elbv2.send(
      new DeleteListenerCommand({ ListenerArn: listener?.ListenerArn }),
    );
    await world.aws.testClients.elbv2.send(
      new DeleteTargetGroupCommand({ TargetGroupArn: group.arn }),
    );

    const report = await runSweep(world.runtime);
    expect(report.resyncs).toBe(1);
    await world.drain();
    const after = await loadBalancer();
    expect(after.listeners).toEqual(['TCP:443', 'TCP:80']);
    expect(Object.values(after.targets).every((ids) => ids.length === 3)).toBe(true);
    // The repair is the only thing said, and it says what it did.
    const events = await world.api.listNamespacedEvent({ namespace: 'default' });
    const repaired = events.items.filter((e) => e.reason === 'RepairedLoadBalancer');
    expect(repaired).toHaveLength(1);
    expect(repaired[0]?.type).toBe('Warning');
    const message = repaired[0]?.message ?? '';
    expect(message).toMatch(/^Repaired load balancer drift: /);
    expect(message).toMatch(/create target group k8s-/);
    expect(message).toMatch(/create listener TCP:(80|443)/);
    expect(message).toMatch(/register 3 targets for port (80|443)/);
    expect(events.items.filter((e) => e.reason === 'EnsuringLoadBalancer')).toHaveLength(1);
  });

  it('a sync after a holder that died mid-change (its lease expired unreleased) checks AWS instead of trusting the checkpoint', async () => {
    await world.createService();
    const { state } = await loadBalancer();
    // What a holder that died half-way through changing the listeners leaves behind.
    const listeners = await world.aws.testClients.elbv2.send(
      new DescribeListenersCommand({ LoadBalancerArn: state.loadBalancerArn }),
    );
    const { DeleteListenerCommand } = await import('@aws-sdk/client-elastic-load-balancing-v2');
    await world.aws.testClients.elbv2.send(
      new DeleteListenerCommand({ ListenerArn: listeners.Listeners?.[0]?.ListenerArn }),
    );
    // A clean release vouches for the checkpoint: a message for the same spec touches no AWS.
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    expect((await loadBalancer()).listeners).toHaveLength(1);

    const dead = await world.runtime.store.acquire(serviceLeasePk(key), 'dead-worker', -1);
    expect(dead.acquired).toBe(true);
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    expect((await loadBalancer()).listeners).toEqual(['TCP:443', 'TCP:80']);
    const item = await world.runtime.store.getItem(serviceLeasePk(key));
    expect(item?.unverified).toBeUndefined();
  });

  it('a host update on a lease taken over from a dead holder reads the registered targets from AWS and keeps the unverified mark for the next full sync', async () => {
    await world.createService();
    const dead = await world.runtime.store.acquire(serviceLeasePk(key), 'dead-worker', -1);
    expect(dead.acquired).toBe(true);
    // A node joins: node sync's host update takes the dead holder's lease. Whatever that holder
    // was doing to AWS may be half done, so the targets the record lists are not to be trusted.
    const added = await world.addNode();
    world.aws.recorder.reset();
    await world.send({ v: 1, kind: 'node', reason: 'node added' });
    await world.drain();
    expect(world.metrics.get('HostUpdatesFromAws')).toBe(1);
    expect(world.aws.recorder.count('DescribeTargetHealth')).toBe(2);
    const { targets } = await loadBalancer();
    expect(Object.values(targets).every((ids) => ids.includes(added.instanceId))).toBe(true);
    // It vouches for the targets only: the next full sync checks AWS and clears the mark.
    expect((await world.runtime.store.getItem(serviceLeasePk(key)))?.unverified).toBe(true);
    world.aws.recorder.reset();
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    expect(world.aws.recorder.count('DescribeLoadBalancers')).toBeGreaterThan(0);
    expect((await world.runtime.store.getItem(serviceLeasePk(key)))?.unverified).toBeUndefined();
  });

  it('a change the dead holder was asked to run (dirty) is run by whoever takes the lease over, even a host update', async () => {
    await world.createService();
    const dead = await world.runtime.store.acquire(serviceLeasePk(key), 'dead-worker', 3);
    expect(dead.acquired).toBe(true);
    // A ports change arrives while the holder lives: the key is marked dirty for it, then the
    // holder dies without running that pass.
    await world.api.patchNamespacedService(
      {
        name: 'web',
        namespace: 'default',
        body: {
          spec: { ports: [{ name: 'alt', protocol: 'TCP', port: 8080, targetPort: 8080 }] },
        },
      },
      merge,
    );
    expect(
      await world.runtime.store.acquire(serviceLeasePk(key), 'refused-worker', 30),
    ).toMatchObject({ acquired: false });
    await new Promise((resolve) => setTimeout(resolve, 3_100));
    // Only a node change comes (the change's own message is not under test here).
    await world.addNode();
    await world.send({ v: 1, kind: 'node', reason: 'node added' });
    await world.drain();
    expect((await loadBalancer()).listeners).toEqual(['TCP:8080']);
    expect(world.metrics.get('Syncs{outcome=done,kind=hosts}')).toBe(0);
  });

  it('a full sync that refuses the spec (terminal) on an unverified lease clears the mark with the checkpoint', async () => {
    await world.createService();
    const dead = await world.runtime.store.acquire(serviceLeasePk(key), 'dead-worker', -1);
    expect(dead.acquired).toBe(true);
    await world.api.patchNamespacedService(
      {
        name: 'web',
        namespace: 'default',
        body: {
          metadata: {
            annotations: { 'service.beta.kubernetes.io/aws-load-balancer-scheme': 'sideways' },
          },
        },
      },
      merge,
    );
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    expect(world.metrics.get('Syncs{outcome=terminal,kind=service}')).toBe(1);
    expect((await world.runtime.store.getItem(serviceLeasePk(key)))?.unverified).toBeUndefined();
    // The refused spec cleared the checkpoint: the next pass for a valid spec ensures in full.
    expect((await recordOf())?.checkpoint).toBeUndefined();
  });

  it('a host update that finds the NLB and its target groups deleted by hand has the full sync recreate them, with no UpdateLoadBalancerFailed', async () => {
    await world.createService();
    const { state } = await loadBalancer();
    const { DeleteLoadBalancerCommand } = await import('@aws-sdk/client-elastic-load-balancing-v2');
    await world.aws.testClients.elbv2.send(
      new DeleteLoadBalancerCommand({ LoadBalancerArn: state.loadBalancerArn }),
    );
    for (const tg of Object.values(state.targetGroups ?? {})) {
      await world.aws.testClients.elbv2.send(
        new DeleteTargetGroupCommand({ TargetGroupArn: tg.arn }),
      );
    }
    const added = await world.addNode();
    await world.send({ v: 1, kind: 'node', reason: 'node added' });
    await world.drain();
    const after = await loadBalancer();
    expect(after.lb?.LoadBalancerArn).toBeDefined();
    expect(after.lb?.LoadBalancerArn).not.toBe(state.loadBalancerArn);
    expect(after.listeners).toEqual(['TCP:443', 'TCP:80']);
    expect(Object.values(after.targets).every((ids) => ids.includes(added.instanceId))).toBe(true);
    const events = await world.api.listNamespacedEvent({ namespace: 'default' });
    expect(events.items.map((e) => e.reason)).not.toContain('UpdateLoadBalancerFailed');
    // moto names a recreated NLB's DNS record as it named the first one, so the
    // RecreatedLoadBalancer Warning (a new DNS name in AWS) is proved by the sync's unit tests.
  });

  it('the sweep counts Services whose syncs have failed for more than 15 minutes (FailingServices)', async () => {
    await world.createService();
    await world.api.createNamespacedService({
      namespace: 'default',
      body: loadBalancerService('other'),
    });
    const now = Date.now();
    await world.runtime.store.setAttributes(serviceLeasePk(key), {
      failures: 7,
      failingSince: now - 16 * 60_000,
    });
    await world.runtime.store.setAttributes(serviceLeasePk('default/other'), {
      failures: 2,
      failingSince: now - 60_000,
    });
    const report = await runSweep(world.runtime);
    expect(report.failingServices).toBe(1);
    expect(world.metrics.get('FailingServices')).toBe(1);
  });

  it('sweeps a healthy Service quietly: reads only, no Event, no Service or state write', async () => {
    await world.createService();
    const before = await world.api.listNamespacedEvent({ namespace: 'default' });
    const service = await world.api.readNamespacedService({ name: 'web', namespace: 'default' });
    const item = await world.runtime.store.getItem(servicePk(key));
    world.aws.recorder.reset();
    for (let sweep = 0; sweep < 2; sweep++) {
      await runSweep(world.runtime);
      await world.drain();
    }
    const after = await world.api.listNamespacedEvent({ namespace: 'default' });
    expect(after.items.map((e) => `${e.reason}x${e.count}`)).toEqual(
      before.items.map((e) => `${e.reason}x${e.count}`),
    );
    const again = await world.api.readNamespacedService({ name: 'web', namespace: 'default' });
    expect(again.metadata?.resourceVersion).toBe(service.metadata?.resourceVersion);
    const mutations = Object.entries(world.aws.recorder.byOperation()).filter(([op]) =>
      /^(ElasticLoadBalancingV2|EC2)\.(?!Describe)/.test(op),
    );
    expect(mutations).toEqual([]);
    // The only state writes are the lease's own (take and release), never the record.
    const itemAfter = await world.runtime.store.getItem(servicePk(key));
    expect(itemAfter?.ver).toBe(item?.ver);
    expect(itemAfter?.recz).toEqual(item?.recz);
    expect(world.metrics.get('Syncs{outcome=done,kind=resync}')).toBe(2);
  });

  it('deletes resources whose Service and state are both gone, after the grace period', async () => {
    await world.createService();
    // State lost and the Service gone without the controller noticing.
    await world.api.patchNamespacedService(
      { name: 'web', namespace: 'default', body: { metadata: { finalizers: null } } },
      merge,
    );
    await world.api.deleteNamespacedService({ name: 'web', namespace: 'default' });
    const { DeleteCommand, DynamoDBDocumentClient } = await import('@aws-sdk/lib-dynamodb');
    const { DynamoDBClient } = await import('@aws-sdk/client-dynamodb');
    await DynamoDBDocumentClient.from(world.aws.account.client(DynamoDBClient)).send(
      new DeleteCommand({ TableName: 'state', Key: { pk: servicePk(key) } }),
    );
    const first = await runSweep(world.runtime);
    expect(first).toMatchObject({ orphansSeen: 1, orphansDeleted: 0 }); // first seen: grace starts
    const second = await runSweep(world.runtime);
    expect(second).toMatchObject({ orphansSeen: 1, orphansDeleted: 1 });
    expect(await world.aws.ownedResources()).toEqual([]);
    const sweepItem = await world.runtime.store.getItem('lease#sweep');
    expect(Object.keys(sweepItem ?? {}).filter((k) => k.startsWith('orphan#'))).toEqual([]);
  });

  it('moves malformed messages to the DLQ at once, saying what is wrong, without failing the rest of the batch', async () => {
    await world.api.createNamespacedService({
      namespace: 'default',
      body: loadBalancerService('web'),
    });
    await world.send('this is not JSON');
    await world.send({ v: 1, kind: 'mystery', key } as never);
    await world.send({ v: 1, kind: 'service', key });
    await world.drain();
    expect(world.metrics.get('MalformedMessages')).toBe(2);
    const parked = await world.deadLetters();
    expect(parked.map((m) => m.body).sort()).toEqual([
      'this is not JSON',
      JSON.stringify({ v: 1, kind: 'mystery', key }),
    ]);
    expect(parked.find((m) => m.body === 'this is not JSON')?.problem).toBe('not JSON');
    expect(parked.find((m) => m.body !== 'this is not JSON')?.problem).toMatch(/^kind: /);
    expect((await loadBalancer()).listeners).toEqual(['TCP:443', 'TCP:80']);
    expect(await world.queueDepth()).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
  });

  it('without a DLQ configured, drops malformed messages, logged and counted', async () => {
    await world.stop();
    world = await createRuntimeWorld({ deadLetterQueueUrl: undefined });
    await world.send('this is not JSON');
    await world.drain();
    expect(world.metrics.get('MalformedMessages')).toBe(1);
    expect(world.log.lines.map((l) => l.message)).toContain('dropping malformed message');
    expect(await world.deadLetters()).toEqual([]);
    expect(await world.queueDepth()).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
  });

  it('starts the node-sync timer chain once and keeps it ticking with delayed messages', async () => {
    const { scheduleTick } = await import('../../functions/runtime/node-sync');
    expect(await scheduleTick(world.runtime)).toBe('started');
    expect(await scheduleTick(world.runtime)).toBe('running');
    // Ticks travel on the node queue, never behind the work queue's Service backlog.
    expect(await world.queueDepth('work')).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
    const [tick] = await world.receiveNodes(1);
    await world.handleNodes([tick!]);
    expect(await world.queueDepth('nodes')).toMatchObject({ delayed: 1 });
    expect(await runNodeSync(world.runtime, [])).toEqual({ kind: 'done' });
  });

  it('a tick that finds node sync running still schedules the next tick, so the chain goes on', async () => {
    const { scheduleTick } = await import('../../functions/runtime/node-sync');
    await scheduleTick(world.runtime);
    const [tick] = await world.receiveNodes(1);
    const held = await world.runtime.store.acquireRunLease('node-sync', 'another-pass', 60);
    expect(held.acquired).toBe(true);
    const result = await world.handleNodes([tick!]);
    expect(result.batchItemFailures).toEqual([]);
    expect(await world.queueDepth('nodes')).toMatchObject({ visible: 0, delayed: 1 });
  });

  it('backs off node sync during a Kubernetes API outage, and replaces the tick past the resend limit instead of walking it to the DLQ', async () => {
    const { scheduleTick } = await import('../../functions/runtime/node-sync');
    await scheduleTick(world.runtime);
    const [tick] = await world.receiveNodes(1);
    world.kube.failNextRequests(100, 500, { path: /\/nodes/ });
    const early = await world.handleNodes([{ ...tick!, receiveCount: 1 }]);
    expect(early.batchItemFailures).toEqual([{ itemIdentifier: tick!.messageId }]);
    expect(world.metrics.get('NodeSyncFailures')).toBe(1);

    const late = await world.handleNodes([{ ...tick!, receiveCount: 8 }]);
    expect(late.batchItemFailures).toEqual([]);
    // The fresh copy is the same tick of the same chain, delayed by the grown backoff.
    const depth = await world.queueDepth('nodes');
    expect(depth.delayed + depth.inFlight).toBeGreaterThanOrEqual(1);
    expect(world.metrics.get('NodeSyncFailures')).toBe(2);
  });
});
