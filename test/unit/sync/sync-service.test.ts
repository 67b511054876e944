import { describe, expect, it } from 'vitest';
import { classFinalizer, upstreamFinalizer, type ClaimPolicy } from '../../../functions/core/claim';
import {
  InvariantError,
  RequeueAfterError,
  RetryableError,
  TerminalError,
} from '../../../functions/core/errors';
import type { Service } from '../../../functions/core/objects';
import { syncNodes } from '../../../functions/sync/sync-nodes';
import { syncService } from '../../../functions/sync/sync-service';
import { makeNode, makeService, type ServiceOptions } from '../../../kit/core-objects';
import { inMemoryWorld } from '../../../kit/in-memory';

const ourClass = 'serverless-service-controller.io/nlb';
const classless: ClaimPolicy = { loadBalancerClass: ourClass, claimClassless: true };
const classMode: ClaimPolicy = { loadBalancerClass: ourClass, claimClassless: false };
const key = 'default/web';

/** Prepare: a world with two nodes and one Service in the API. */
function world(options: ServiceOptions = {}, claim: ClaimPolicy = classless) {
  const w = inMemoryWorld({ claim });
  w.kube.nodes = [makeNode('node-a'), makeNode('node-b')];
  w.kube.put(makeService(options));
  return w;
}

function stored(w: ReturnType<typeof world>): Service | undefined {
  return w.kube.stored('default', 'web');
}

describe('syncService: ensure branch (S10)', () => {
  it('creates the LB with Ensuring/Ensured events and writes the status', async () => {
    const w = world();
    const outcome = await syncService(key, w.deps);

    expect(outcome).toEqual({ kind: 'done' });
    expect(w.events.reasons()).toEqual([
      'Normal EnsuringLoadBalancer',
      'Normal EnsuredLoadBalancer',
    ]);
    expect(w.events.events[0]).toMatchObject({
      message: 'Ensuring load balancer',
      object: { kind: 'Service', name: 'web', namespace: 'default' },
    });
    expect(w.provider.balancers.get('uid-1')?.hosts).toHaveLength(2);
    expect(stored(w)?.status?.loadBalancer).toEqual({
      ingress: [{ hostname: 'k8s-default-web.elb.us-east-1.amazonaws.com' }],
    });
  });

  it('adds the finalizer before any cloud call', async () => {
    const w = world();
    await syncService(key, w.deps);
    const finalizer = w.log.indexOf(`kube.addFinalizer ${key} ${upstreamFinalizer}`);
    const firstCloudCall = w.log.lines().findIndex((line) => line.startsWith('provider.'));
    expect(finalizer).toBeGreaterThanOrEqual(0);
    expect(finalizer).toBeLessThan(firstCloudCall);
    expect(stored(w)?.metadata?.finalizers).toEqual([upstreamFinalizer]);
  });

  it('uses our own finalizer in LoadBalancerClass mode and keeps other finalizers', async () => {
    const w = world({ loadBalancerClass: ourClass, finalizers: ['example.com/keep'] }, classMode);
    await syncService(key, w.deps);
    expect(stored(w)?.metadata?.finalizers).toEqual(['example.com/keep', classFinalizer]);
  });

  it('writes the snapshot to state before the first cloud change, with the checkpoint cleared', async () => {
    const w = world();
    await syncService(key, w.deps);
    const lines = w.log.lines('state', 'provider');
    const pendingWrite = lines.indexOf(`state.putService ${key} checkpoint=none`);
    const ensure = lines.findIndex((l) => l.startsWith('provider.ensureLoadBalancer'));
    expect(pendingWrite).toBeGreaterThanOrEqual(0);
    expect(pendingWrite).toBeLessThan(ensure);
    expect(lines.at(-1)).toBe(`state.putService ${key} checkpoint=set`);
    expect(w.state.records.get(key)?.snapshot.metadata?.uid).toBe('uid-1');
  });

  it('warns UnAvailableLoadBalancer with no eligible hosts and still ensures', async () => {
    const w = world();
    w.kube.nodes = [];
    await syncService(key, w.deps);
    expect(w.events.reasons()).toEqual([
      'Normal EnsuringLoadBalancer',
      'Warning UnAvailableLoadBalancer',
      'Normal EnsuredLoadBalancer',
    ]);
    expect(w.events.events[1]?.message).toBe('There are no available nodes for LoadBalancer');
    expect(w.provider.balancers.get('uid-1')?.hosts).toEqual([]);
  });

  it('does nothing for a Service of another LoadBalancerClass', async () => {
    const w = world({ loadBalancerClass: 'service.k8s.aws/nlb' }, classMode);
    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.log.lines('provider', 'events')).toEqual([]);
    expect(w.log.lines('kube').filter((l) => !l.startsWith('kube.getService'))).toEqual([]);
  });

  it('never mutates the Service it read (S13): the objects handed out are frozen', async () => {
    const w = world({ finalizers: ['example.com/keep'] });
    await expect(syncService(key, w.deps)).resolves.toEqual({ kind: 'done' });
  });
});

describe('syncService: Services that are not ours', () => {
  it('leaves the built-in controller’s Service alone in class mode, status and finalizer included', async () => {
    const w = world(
      { finalizers: [upstreamFinalizer], hostname: 'builtin.elb.amazonaws.com' },
      classMode,
    );
    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.log.lines('provider', 'events')).toEqual([]);
    expect(w.log.lines('kube')).toEqual([`kube.getService ${key}`]);
    expect(stored(w)?.status?.loadBalancer?.ingress?.[0]?.hostname).toBe(
      'builtin.elb.amazonaws.com',
    );
  });
});

describe('syncService: checkpoint', () => {
  it('a second sync of an unchanged Service makes no cloud call and emits no events', async () => {
    const w = world();
    await syncService(key, w.deps);
    w.log.clear();
    w.events.events.length = 0;

    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.log.lines('provider')).toEqual([]);
    expect(w.events.events).toEqual([]);
    expect(w.log.lines('kube')).toEqual([`kube.getService ${key}`]);
  });

  it('on a hit, still restores a removed finalizer and a cleared status', async () => {
    const w = world();
    await syncService(key, w.deps);
    const current = structuredClone(stored(w)!) as {
      metadata: { finalizers?: string[] };
      status: object;
    };
    current.metadata.finalizers = [];
    current.status = {};
    w.kube.put(current);
    w.log.clear();

    await syncService(key, w.deps);
    expect(w.log.lines('provider')).toEqual([]);
    expect(stored(w)?.metadata?.finalizers).toEqual([upstreamFinalizer]);
    expect(stored(w)?.status?.loadBalancer?.ingress).toHaveLength(1);
  });

  it('misses when an annotation changes, and ensures again', async () => {
    const w = world();
    await syncService(key, w.deps);
    w.kube.put({
      ...stored(w)!,
      metadata: { ...stored(w)!.metadata, annotations: { 'x.io/a': 'b' } },
    });
    w.log.clear();

    await syncService(key, w.deps);
    expect(w.log.lines('provider')).toHaveLength(1);
    expect(w.provider.balancers.get('uid-1')?.annotations).toEqual({ 'x.io/a': 'b' });
  });

  it('is ignored when asked (the sweep’s drift check): Ensure runs, and with no drift says and writes nothing', async () => {
    const w = world();
    await syncService(key, w.deps);
    w.log.clear();
    w.events.events.length = 0;
    expect(await syncService(key, w.deps, { ignoreCheckpoint: true })).toEqual({ kind: 'done' });
    expect(w.log.lines('provider')).toHaveLength(1);
    expect(w.events.reasons()).toEqual([]);
    expect(w.log.lines('state').filter((l) => l.startsWith('state.putService'))).toEqual([]);
    expect(w.log.lines('kube').filter((l) => !l.startsWith('kube.getService'))).toEqual([]);
  });

  it('a drift check that repairs something warns RepairedLoadBalancer naming it, and stores the checkpoint again', async () => {
    const w = world();
    await syncService(key, w.deps);
    const checkpoint = w.state.records.get(key)?.checkpoint;
    // Someone deregistered the targets behind our back.
    w.provider.balancers.get('uid-1')!.hosts = [];
    w.log.clear();
    w.events.events.length = 0;
    expect(await syncService(key, w.deps, { ignoreCheckpoint: true })).toEqual({ kind: 'done' });
    expect(w.events.events).toEqual([
      expect.objectContaining({
        type: 'Warning',
        reason: 'RepairedLoadBalancer',
        message: 'Repaired load balancer drift: register targets',
      }),
    ]);
    // The checkpoint is cleared before the repair and stored again after it.
    expect(w.log.lines('state')).toEqual([
      `state.getService ${key}`,
      'state.getEligibleHosts',
      `state.putService ${key} checkpoint=none`,
      `state.putService ${key} checkpoint=set`,
    ]);
    expect(w.state.records.get(key)?.checkpoint).toBe(checkpoint);
    expect(w.provider.balancers.get('uid-1')?.hosts).toHaveLength(2);
  });

  it('the pass after one that died finishes its work as an Ensure (Normal), not as drift (Warning)', async () => {
    const w = world();
    await syncService(key, w.deps);
    // Half the targets a dead pass meant to change.
    w.provider.balancers.get('uid-1')!.hosts = [];
    w.events.events.length = 0;
    expect(await syncService(key, w.deps, { ignoreCheckpoint: true, finishing: true })).toEqual({
      kind: 'done',
    });
    expect(w.events.reasons()).toEqual(['Normal EnsuredLoadBalancer']);
    expect(w.provider.balancers.get('uid-1')?.hosts).toHaveLength(2);
  });

  it('a drift check repairs a finalizer removed by hand and says so', async () => {
    const w = world();
    await syncService(key, w.deps);
    const current = stored(w)!;
    w.kube.put({ ...current, metadata: { ...current.metadata, finalizers: [] } });
    w.events.events.length = 0;
    expect(await syncService(key, w.deps, { ignoreCheckpoint: true })).toEqual({ kind: 'done' });
    expect(stored(w)?.metadata?.finalizers).toEqual([upstreamFinalizer]);
    expect(w.events.events).toEqual([
      expect.objectContaining({
        reason: 'RepairedLoadBalancer',
        message: `Repaired load balancer drift: add finalizer ${upstreamFinalizer}`,
      }),
    ]);
  });

  it('warns RecreatedLoadBalancer with the old and new DNS names when the LB had to be created again', async () => {
    const w = world();
    await syncService(key, w.deps);
    w.provider.balancers.delete('uid-1');
    w.events.events.length = 0;
    expect(await syncService(key, w.deps, { ignoreCheckpoint: true })).toEqual({ kind: 'done' });
    expect(w.events.reasons()).toEqual([
      'Warning RepairedLoadBalancer',
      'Warning RecreatedLoadBalancer',
    ]);
    expect(w.events.events.at(-1)?.message).toBe(
      'Load balancer recreated: its DNS name changed from k8s-default-web.elb.us-east-1.amazonaws.com to k8s-default-web-2.elb.us-east-1.amazonaws.com; update anything that still points at k8s-default-web.elb.us-east-1.amazonaws.com',
    );
    expect(stored(w)?.status?.loadBalancer?.ingress?.[0]?.hostname).toBe(
      'k8s-default-web-2.elb.us-east-1.amazonaws.com',
    );
  });

  it('misses when the eligible host set changes', async () => {
    const w = world();
    await syncService(key, w.deps);
    w.state.eligibleHosts = undefined;
    w.kube.nodes = [makeNode('node-c')];
    w.log.clear();

    await syncService(key, w.deps);
    expect(w.log.lines('provider')).toEqual([
      `provider.ensureLoadBalancer ${key} uid=uid-1 hosts=node-c`,
    ]);
  });
});

describe('syncService: change events (S3)', () => {
  it('emits the seed’s Normal event for each field changed since the last Ensure', async () => {
    const w = world();
    await syncService(key, w.deps);
    const current = stored(w)!;
    w.kube.put({
      ...current,
      spec: {
        ...current.spec,
        externalTrafficPolicy: 'Local',
        loadBalancerSourceRanges: ['10.0.0.0/8'],
      },
    });
    w.events.events.length = 0;

    await syncService(key, w.deps);
    expect(w.events.events.map((e) => `${e.reason}: ${e.message}`)).toEqual([
      'LoadBalancerSourceRanges: [] -> [10.0.0.0/8]',
      'ExternalTrafficPolicy: Cluster -> Local',
      'EnsuringLoadBalancer: Ensuring load balancer',
      'EnsuredLoadBalancer: Ensured load balancer',
    ]);
  });

  it('emits Type when the Service stops wanting a load balancer, before deleting it', async () => {
    const w = world();
    await syncService(key, w.deps);
    const current = stored(w)!;
    w.kube.put({ ...current, spec: { ...current.spec, type: 'ClusterIP' } });
    w.events.events.length = 0;

    await syncService(key, w.deps);
    expect(w.events.events[0]).toMatchObject({
      type: 'Normal',
      reason: 'Type',
      message: 'LoadBalancer -> ClusterIP',
    });
  });

  it('emits UID when the Service was re-created under the same name', async () => {
    const w = world();
    await syncService(key, w.deps);
    w.kube.put(makeService({ uid: 'uid-2' }));
    w.events.events.length = 0;

    await syncService(key, w.deps);
    expect(w.events.events[0]).toMatchObject({ reason: 'UID', message: 'uid-1 -> uid-2' });
  });

  it('announces a change that does not touch AWS (externalIPs) once, without a cloud call', async () => {
    const w = world();
    await syncService(key, w.deps);
    const current = stored(w)!;
    w.kube.put({ ...current, spec: { ...current.spec, externalIPs: ['192.0.2.10'] } });
    w.events.events.length = 0;
    w.log.clear();

    await syncService(key, w.deps);
    await syncService(key, w.deps);
    expect(w.events.events.map((e) => `${e.reason}: ${e.message}`)).toEqual([
      'ExternalIP: Count: 0 -> 1',
    ]);
    expect(w.log.lines('provider')).toEqual([]);
  });

  it('does not repeat them on a retry after a failed Ensure', async () => {
    const w = world();
    await syncService(key, w.deps);
    const current = stored(w)!;
    w.kube.put({ ...current, spec: { ...current.spec, externalTrafficPolicy: 'Local' } });
    w.provider.faults.failNext('ensureLoadBalancer', new RetryableError('Throttling'));
    await syncService(key, w.deps);
    w.events.events.length = 0;

    await syncService(key, w.deps);
    expect(w.events.reasons()).toEqual([
      'Normal EnsuringLoadBalancer',
      'Normal EnsuredLoadBalancer',
    ]);
  });
});

describe('syncService: status (S12)', () => {
  it('skips the status patch when the status is unchanged', async () => {
    const w = world();
    await syncService(key, w.deps);
    w.provider.fingerprint = 'fake-provider-v2'; // forces a real Ensure with the same result
    w.log.clear();

    await syncService(key, w.deps);
    expect(w.log.lines('provider')).toHaveLength(1);
    expect(w.log.lines('kube').filter((l) => l.startsWith('kube.patchServiceStatus'))).toEqual([]);
  });

  it('ignores NotFound when the Service disappears before its status is patched', async () => {
    // Already finalized, so the only write that can 404 is the status patch.
    const w = world({ finalizers: [upstreamFinalizer] });
    w.kube.afterGet = () => w.kube.remove('default', 'web');

    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.log.lines('kube').some((l) => l.startsWith('kube.patchServiceStatus'))).toBe(true);
    expect(w.events.reasons()).not.toContain('Warning SyncLoadBalancerFailed');
  });
});

describe('syncService: delete branch (S9)', () => {
  async function ensured(options: ServiceOptions = {}, claim: ClaimPolicy = classless) {
    const w = world(options, claim);
    await syncService(key, w.deps);
    w.log.clear();
    w.events.events.length = 0;
    return w;
  }

  /** The spec flipped back to `current`, the last one applied: the next sync ensures again. */
  async function expectEnsuresAfterFlipBack(
    w: Awaited<ReturnType<typeof ensured>>,
    current: Service,
  ) {
    w.kube.put(current);
    w.log.clear();
    await syncService(key, w.deps);
    expect(w.log.lines('provider').some((l) => l.startsWith('provider.ensureLoadBalancer '))).toBe(
      true,
    );
  }

  function markDeleting(w: Awaited<ReturnType<typeof ensured>>) {
    const current = stored(w)!;
    w.kube.put({
      ...current,
      metadata: { ...current.metadata, deletionTimestamp: '2026-11-30T12:00:00Z' },
    });
  }

  it('deletes the LB, then removes the finalizer, with Deleting/Deleted events', async () => {
    const w = await ensured();
    markDeleting(w);

    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.events.reasons()).toEqual([
      'Normal DeletingLoadBalancer',
      'Normal DeletedLoadBalancer',
    ]);
    const deleted = w.log.indexOf(`provider.ensureLoadBalancerDeleted ${key}`);
    const unfinalized = w.log.indexOf(`kube.removeFinalizer ${key} ${upstreamFinalizer}`);
    expect(deleted).toBeGreaterThanOrEqual(0);
    expect(unfinalized).toBeGreaterThan(deleted);
    expect(w.provider.balancers.size).toBe(0);
    expect(stored(w)).toBeUndefined(); // the last finalizer went, so the API removed it
    expect(w.state.records.has(key)).toBe(false);
    expect(w.log.lines('kube').some((l) => l.startsWith('kube.patchServiceStatus'))).toBe(false);
  });

  it('cleans up after a missed type change: finalizer present, type ClusterIP', async () => {
    const w = await ensured();
    const current = stored(w)!;
    w.kube.put({ ...current, spec: { ...current.spec, type: 'ClusterIP' } });

    await syncService(key, w.deps);
    expect(w.provider.balancers.size).toBe(0);
    expect(stored(w)?.metadata?.finalizers).toEqual([]);
    expect(stored(w)?.status?.loadBalancer).toEqual({});
    expect(w.events.reasons()).toEqual([
      'Normal Type',
      'Normal DeletingLoadBalancer',
      'Normal DeletedLoadBalancer',
    ]);
  });

  it('keeps the finalizer when deletion fails, warns SyncLoadBalancerFailed and retries', async () => {
    const w = await ensured();
    markDeleting(w);
    w.provider.faults.failNext(
      'ensureLoadBalancerDeleted',
      new RetryableError('Throttling: Rate exceeded'),
    );

    const outcome = await syncService(key, w.deps);
    expect(outcome.kind).toBe('retry');
    expect(stored(w)?.metadata?.finalizers).toEqual([upstreamFinalizer]);
    expect(w.events.events.at(-1)).toMatchObject({
      type: 'Warning',
      reason: 'SyncLoadBalancerFailed',
      message: 'Error syncing load balancer: Throttling: Rate exceeded',
    });
    expect(w.state.records.has(key)).toBe(true);
  });

  it('keeps the finalizer while resources are still in use, and finishes on a later pass', async () => {
    const w = await ensured();
    markDeleting(w);
    w.provider.deletesStillInUse = 1;

    expect(await syncService(key, w.deps)).toMatchObject({ kind: 'requeue-after', seconds: 30 });
    expect(stored(w)?.metadata?.finalizers).toEqual([upstreamFinalizer]);
    expect(w.events.reasons()).toEqual(['Normal DeletingLoadBalancer']);

    // The NLB is gone but its security group is not: the next pass deletes again, without
    // repeating the Deleting event, and only then releases the finalizer.
    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(
      w.log.lines('provider').filter((l) => l.startsWith('provider.ensureLoadBalancerDeleted')),
    ).toHaveLength(2);
    expect(w.events.reasons()).toEqual([
      'Normal DeletingLoadBalancer',
      'Normal DeletedLoadBalancer',
    ]);
    expect(stored(w)).toBeUndefined();
  });

  it('does not repeat Type or Deleting events on a requeued type-change cleanup', async () => {
    const w = await ensured();
    const current = stored(w)!;
    w.kube.put({ ...current, spec: { ...current.spec, type: 'ClusterIP' } });
    w.provider.deletesStillInUse = 1;
    await syncService(key, w.deps);
    await syncService(key, w.deps);
    expect(w.events.reasons()).toEqual([
      'Normal Type',
      'Normal DeletingLoadBalancer',
      'Normal DeletedLoadBalancer',
    ]);
  });

  it('writes a changed Service’s record once, after the provider (each record write costs 2–3 DynamoDB units)', async () => {
    const w = await ensured();
    const current = stored(w)!;
    w.kube.put({
      ...current,
      spec: { ...current.spec, ports: [{ port: 8080, protocol: 'TCP', nodePort: 30888 }] },
    });
    w.log.clear();
    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    const lines = w.log.lines('state', 'provider');
    expect(lines.filter((l) => l.startsWith('state.putService'))).toEqual([
      `state.putService ${key} checkpoint=set`,
    ]);
    const ensure = lines.findIndex((l) => l.startsWith('provider.ensureLoadBalancer'));
    expect(lines.indexOf(`state.putService ${key} checkpoint=set`)).toBeGreaterThan(ensure);
  });

  it('an update whose provider call fails stores the new snapshot with the checkpoint cleared, so flipping back ensures again', async () => {
    const w = await ensured();
    const current = stored(w)!;
    w.kube.put({
      ...current,
      spec: { ...current.spec, ports: [{ port: 8080, protocol: 'TCP', nodePort: 30888 }] },
    });
    w.provider.faults.failNext('ensureLoadBalancer', new RetryableError('Throttling'));
    expect((await syncService(key, w.deps)).kind).toBe('retry');
    expect(w.state.records.get(key)?.checkpoint).toBeUndefined();
    expect(w.state.records.get(key)?.snapshot.spec?.ports?.[0]?.port).toBe(8080);

    await expectEnsuresAfterFlipBack(w, current);
  });

  it('refuses a known Service whose new spec its record cannot hold before the provider applies it', async () => {
    const w = await ensured();
    const current = stored(w)!;
    const recorded = JSON.stringify(w.state.records.get(key)).length;
    w.state.maxRecordJsonBytes = recorded + 200;
    w.kube.put({
      ...current,
      metadata: {
        ...current.metadata,
        annotations: {
          'service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags': `team=${'x'.repeat(400)}`,
        },
      },
    });
    w.log.clear();
    expect((await syncService(key, w.deps)).kind).toBe('terminal');
    expect(w.log.lines('provider').filter((l) => l.startsWith('provider.ensure'))).toEqual([]);
    expect(w.events.reasons()).toContain('Warning SyncLoadBalancerFailed');
  });

  it('a delete that completes writes no record before removing it', async () => {
    const w = await ensured();
    const current = stored(w)!;
    w.kube.put({ ...current, spec: { ...current.spec, type: 'NodePort' } });
    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.log.lines('state').filter((l) => l.startsWith('state.putService'))).toEqual([]);
    expect(w.state.records.get(key)).toBeUndefined();
  });

  it('a delete that fails after the LB is gone keeps no checkpoint, so flipping back ensures again', async () => {
    const w = await ensured();
    const current = stored(w)!;
    w.kube.put({ ...current, spec: { ...current.spec, type: 'NodePort' } });
    w.kube.faults.failNext('removeFinalizer', new RetryableError('etcdserver: request timed out'));
    expect((await syncService(key, w.deps)).kind).toBe('retry');
    expect(w.state.records.get(key)?.checkpoint).toBeUndefined();

    await expectEnsuresAfterFlipBack(w, current);
  });

  it('a delete that fails clears the checkpoint, so flipping back ensures again', async () => {
    const w = await ensured();
    const current = stored(w)!;
    w.kube.put({ ...current, spec: { ...current.spec, type: 'NodePort' } });
    w.provider.faults.failNext('ensureLoadBalancerDeleted', new RetryableError('Throttling'));
    await syncService(key, w.deps);
    expect(w.state.records.get(key)?.checkpoint).toBeUndefined();

    await expectEnsuresAfterFlipBack(w, current);
  });

  it('leaves a Service being deleted under someone else’s finalizer alone: no finalizer of ours, no LB', async () => {
    const w = world({ deleting: true, finalizers: ['example.com/other'] });
    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.log.lines('provider', 'events')).toEqual([]);
    expect(stored(w)?.metadata?.finalizers).toEqual(['example.com/other']);
  });

  it('emits DeletedLoadBalancer and removes the finalizer even when nothing existed', async () => {
    const w = world({ finalizers: [upstreamFinalizer], deleting: true });
    await syncService(key, w.deps);
    expect(w.log.lines('provider')).toEqual([`provider.getLoadBalancer ${key} uid=uid-1`]);
    expect(w.events.reasons()).toEqual(['Normal DeletedLoadBalancer']);
    expect(stored(w)).toBeUndefined();
  });

  it('clears the status of a Service being deleted that another controller’s finalizer keeps alive', async () => {
    const w = world({ finalizers: ['example.com/hold'] });
    await syncService(key, w.deps);
    expect(stored(w)?.status?.loadBalancer?.ingress).toHaveLength(1);
    markDeleting(w);

    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.provider.balancers.size).toBe(0);
    expect(stored(w)?.metadata?.finalizers).toEqual(['example.com/hold']);
    expect(stored(w)?.status?.loadBalancer).toEqual({});
    // After the finalizer went, so the last thing the Service shows is the truth.
    const unfinalized = w.log.indexOf(`kube.removeFinalizer ${key} ${upstreamFinalizer}`);
    const cleared = w.log.indexOf(`kube.patchServiceStatus ${key} {}`);
    expect(cleared).toBeGreaterThan(unfinalized);
  });

  it('S13 on the delete path: the objects read stay frozen, other finalizers are kept, and a removal is not repeated', async () => {
    const w = world({ finalizers: ['example.com/hold'] });
    await syncService(key, w.deps);
    markDeleting(w);
    w.log.clear();
    // The in-memory API hands out deep-frozen copies: any mutation of what was read throws.
    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(stored(w)?.metadata?.finalizers).toEqual(['example.com/hold']);
    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.log.lines('kube').filter((l) => l.startsWith('kube.removeFinalizer'))).toHaveLength(1);
  });

  it.each([
    ['class mode', classMode],
    ['class-less mode', classless],
  ])(
    'releases both of our finalizers from a Service of our class after claimClassless was switched (%s)',
    async (_, claim) => {
      const w = world(
        {
          loadBalancerClass: ourClass,
          finalizers: [upstreamFinalizer, 'example.com/hold', classFinalizer],
          deleting: true,
        },
        claim,
      );
      expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
      expect(stored(w)?.metadata?.finalizers).toEqual(['example.com/hold']);
    },
  );

  it('leaves the built-in controller’s finalizer on a class-less Service in class mode', async () => {
    const w = world({ finalizers: [upstreamFinalizer], deleting: true }, classMode);
    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(stored(w)?.metadata?.finalizers).toEqual([upstreamFinalizer]);
    expect(w.log.lines('provider', 'events')).toEqual([]);
  });

  it('makes no cloud call for a Service that was never ours (no state, no finalizer, no status)', async () => {
    const w = world({ type: 'ClusterIP' });
    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.log.lines('provider', 'events')).toEqual([]);
  });
});

describe('syncService: Service gone (S7) and re-created (S8)', () => {
  it('deletes what state records when the Service is gone, then forgets the key', async () => {
    const w = world();
    await syncService(key, w.deps);
    w.kube.remove('default', 'web');
    w.events.events.length = 0;

    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.provider.balancers.size).toBe(0);
    expect(w.events.reasons()).toEqual([
      'Normal DeletingLoadBalancer',
      'Normal DeletedLoadBalancer',
    ]);
    expect(w.events.events[0]?.object).toMatchObject({ name: 'web', uid: 'uid-1' });
    expect(w.state.records.has(key)).toBe(false);
  });

  it('warns DeleteLoadBalancerFailed and keeps the key when that deletion fails', async () => {
    const w = world();
    await syncService(key, w.deps);
    w.kube.remove('default', 'web');
    w.events.events.length = 0;
    w.provider.faults.failNext('ensureLoadBalancerDeleted', new RetryableError('InternalFailure'));

    expect((await syncService(key, w.deps)).kind).toBe('retry');
    expect(w.events.events.at(-1)).toMatchObject({
      type: 'Warning',
      reason: 'DeleteLoadBalancerFailed',
      message: 'Error deleting load balancer: InternalFailure',
    });
    expect(w.state.records.has(key)).toBe(true);
  });

  it('leaks nothing when the Service is deleted after a failed first create', async () => {
    const w = world();
    w.provider.failAfterCreate = new RetryableError('timeout after creating the NLB');
    expect((await syncService(key, w.deps)).kind).toBe('retry');
    expect(w.provider.balancers.size).toBe(1); // partially created

    w.kube.remove('default', 'web'); // e.g. finalizer stripped by hand, Service gone
    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.provider.balancers.size).toBe(0);
  });

  it('does nothing when the Service is gone and state has no record', async () => {
    const w = world();
    w.kube.remove('default', 'web');
    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.log.lines('provider', 'events')).toEqual([]);
  });

  it('deletes the old UID’s resources before ensuring the re-created Service', async () => {
    const w = world();
    await syncService(key, w.deps);
    w.kube.put(makeService({ uid: 'uid-2' }));
    w.events.events.length = 0;
    w.log.clear();

    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    const provider = w.log.lines('provider');
    expect(provider).toEqual([
      `provider.ensureLoadBalancerDeleted ${key} uid=uid-1`,
      `provider.ensureLoadBalancer ${key} uid=uid-2 hosts=node-a,node-b`,
    ]);
    expect(w.events.events.map((e) => `${e.reason} ${e.object.uid}`)).toEqual([
      'UID uid-2',
      'DeletingLoadBalancer uid-1',
      'DeletedLoadBalancer uid-1',
      'EnsuringLoadBalancer uid-2',
      'EnsuredLoadBalancer uid-2',
    ]);
    expect([...w.provider.balancers.keys()]).toEqual(['uid-2']);
  });
});

describe('syncService: errors (S11, docs/design.md §4)', () => {
  it('a terminal spec problem warns once, adds no finalizer and calls no cloud', async () => {
    const w = world({
      ports: [
        { name: 'dns-tcp', protocol: 'TCP', port: 53, nodePort: 30053 },
        { name: 'dns-udp', protocol: 'UDP', port: 53, nodePort: 30054 },
      ],
    });
    const outcome = await syncService(key, w.deps);
    expect(outcome.kind).toBe('terminal');
    expect(w.events.reasons()).toEqual(['Warning SyncLoadBalancerFailed']);
    expect(w.events.events[0]?.message).toMatch(
      /^Error syncing load balancer: ports 53\/TCP and 53\/UDP must use the same nodePort/,
    );
    expect(w.log.lines('provider')).toEqual([]);
    expect(stored(w)?.metadata?.finalizers).toBeUndefined();
  });

  it('S11 warns once per spec across sweeps: an invalid change to an ensured Service is warned about once, sweeps stay silent, the next change warns again', async () => {
    const w = world();
    await syncService(key, w.deps);
    const invalid = { ...stored(w)!, spec: { ...stored(w)!.spec, loadBalancerIP: '10.0.0.5' } };
    w.kube.put(invalid);
    w.events.events.length = 0;
    expect(await syncService(key, w.deps)).toMatchObject({ kind: 'terminal' });
    expect(w.events.reasons()).toEqual(['Normal LoadbalancerIP', 'Warning SyncLoadBalancerFailed']);
    // A failed pass does not vouch for the load balancer.
    expect(w.state.records.get(key)?.checkpoint).toBeUndefined();
    // Nodes come and go between sweeps: the spec is what was warned about, not the host set.
    w.kube.nodes = [...w.kube.nodes, makeNode('node-c')];
    await syncNodes(w.deps);
    w.log.clear();
    for (let sweep = 0; sweep < 3; sweep++) {
      expect(await syncService(key, w.deps, { ignoreCheckpoint: true })).toMatchObject({
        kind: 'terminal',
        repeated: true,
      });
    }
    // The same message again (a forwarder relist, say) is not repeated either.
    expect(await syncService(key, w.deps)).toMatchObject({ kind: 'terminal', repeated: true });
    expect(w.events.reasons()).toEqual(['Normal LoadbalancerIP', 'Warning SyncLoadBalancerFailed']);
    expect(w.log.lines('provider')).toEqual([]);
    expect(w.log.lines('state').filter((l) => l.startsWith('state.putService'))).toEqual([]);

    w.kube.put({ ...invalid, spec: { ...invalid.spec, loadBalancerIP: '10.0.0.6' } });
    expect(await syncService(key, w.deps)).toMatchObject({ kind: 'terminal' });
    expect(w.events.reasons()).toEqual([
      'Normal LoadbalancerIP',
      'Warning SyncLoadBalancerFailed',
      'Normal LoadbalancerIP',
      'Warning SyncLoadBalancerFailed',
    ]);
  });

  it('S11 a spec AWS refuses is warned about once: a sweep neither repeats the Warning nor emits Ensuring', async () => {
    const w = world();
    w.provider.faults.failNext(
      'ensureLoadBalancer',
      new TerminalError('AWS refused to create listener: ValidationError: bad port'),
    );
    expect(await syncService(key, w.deps)).toMatchObject({ kind: 'terminal' });
    expect(w.events.reasons()).toEqual([
      'Normal EnsuringLoadBalancer',
      'Warning SyncLoadBalancerFailed',
    ]);
    w.log.clear();
    expect(await syncService(key, w.deps, { ignoreCheckpoint: true })).toMatchObject({
      kind: 'terminal',
      repeated: true,
    });
    expect(w.events.reasons()).toHaveLength(2);
    expect(w.log.lines('provider')).toEqual([]);
  });

  it.each([
    ['retryable', 'retry', new RetryableError('Throttling')],
    ['unclassified', 'retry', new Error('socket hang up')],
    ['terminal', 'terminal', new TerminalError('invalid annotation x.io/scheme: "public"')],
  ])(
    'a %s provider error becomes a %s outcome with SyncLoadBalancerFailed',
    async (_name, kind, error) => {
      const w = world();
      w.provider.faults.failNext('ensureLoadBalancer', error);
      const outcome = await syncService(key, w.deps);
      expect(outcome.kind).toBe(kind);
      expect(w.events.events.at(-1)).toMatchObject({
        reason: 'SyncLoadBalancerFailed',
        message: `Error syncing load balancer: ${error.message}`,
      });
    },
  );

  it('a requeue-after from the provider is not a failure: fixed delay, no Warning', async () => {
    const w = world();
    w.provider.faults.failNext(
      'ensureLoadBalancer',
      new RequeueAfterError('still provisioning', 20),
    );
    expect(await syncService(key, w.deps)).toMatchObject({ kind: 'requeue-after', seconds: 20 });
    expect(w.events.reasons()).not.toContain('Warning SyncLoadBalancerFailed');
  });

  it('records what a half-finished provider call created, so nothing is lost to a crash', async () => {
    const w = world();
    const error = Object.assign(new RetryableError('Throttling after CreateLoadBalancer'), {
      providerState: { loadBalancerArn: 'arn:fake:created-before-failing' },
    });
    w.provider.faults.failNext('ensureLoadBalancer', error);
    await syncService(key, w.deps);
    expect(w.state.records.get(key)?.provider).toEqual({
      loadBalancerArn: 'arn:fake:created-before-failing',
    });
  });

  it('a state store failure is a retry, never a throw', async () => {
    const w = world();
    await syncService(key, w.deps);
    w.kube.remove('default', 'web');
    w.state.faults.failNext('deleteService', new RetryableError('ProvisionedThroughputExceeded'));
    expect((await syncService(key, w.deps)).kind).toBe('retry');
  });

  it('an invariant error is thrown', async () => {
    const w = world();
    w.provider.faults.failNext(
      'ensureLoadBalancer',
      new InvariantError('two NLBs own this Service'),
    );
    await expect(syncService(key, w.deps)).rejects.toThrow(InvariantError);
  });

  it('a Kubernetes read failure is retried without an event', async () => {
    const w = world();
    w.kube.faults.failNext(
      'getService',
      new RetryableError('the server is currently unable to handle the request'),
    );
    expect((await syncService(key, w.deps)).kind).toBe('retry');
    expect(w.events.events).toEqual([]);
  });

  it('a malformed key is terminal', async () => {
    const w = world();
    expect((await syncService('not-a-key', w.deps)).kind).toBe('terminal');
  });

  it('an NLB still provisioning requeues after a fixed delay without Ensured, and the next pass completes', async () => {
    const w = world();
    w.provider.ensuresProvisioning = 1;
    expect(await syncService(key, w.deps)).toMatchObject({ kind: 'requeue-after', seconds: 15 });
    expect(w.events.reasons()).toEqual(['Normal EnsuringLoadBalancer']);
    expect(w.state.records.get(key)?.checkpoint).toBeUndefined();

    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.events.reasons().at(-1)).toBe('Normal EnsuredLoadBalancer');
  });
});
