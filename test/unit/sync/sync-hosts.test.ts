import { describe, expect, it } from 'vitest';
import type { ClaimPolicy } from '../../../functions/core/claim';
import { RetryableError, TerminalError } from '../../../functions/core/errors';
import { syncHosts } from '../../../functions/sync/sync-hosts';
import { syncNodes } from '../../../functions/sync/sync-nodes';
import { syncService } from '../../../functions/sync/sync-service';
import { makeNode, makeService } from '../../../kit/core-objects';
import { inMemoryWorld } from '../../../kit/in-memory';

const claim: ClaimPolicy = { loadBalancerClass: 'x.io/nlb', claimClassless: true };
const key = 'default/web';

/** Prepare: a Service ensured with nodes a and b; then node c joins and node sync runs. */
async function ensuredThenNodeJoins() {
  const w = inMemoryWorld({ claim });
  w.kube.nodes = [makeNode('a'), makeNode('b')];
  w.kube.put(makeService());
  await syncService(key, w.deps);
  w.kube.nodes = [...w.kube.nodes, makeNode('c')];
  const nodeSync = await syncNodes(w.deps);
  w.log.clear();
  w.events.events.length = 0;
  return { ...w, nodeSync };
}

describe('syncNodes (S16)', () => {
  it('stores the new host set and names the Services whose LB has other hosts', async () => {
    const w = await ensuredThenNodeJoins();
    expect(w.nodeSync).toEqual({ servicesToUpdate: [key], eligibleHosts: 3, changed: true });
    expect(w.state.eligibleHosts?.hosts.map((h) => h.name)).toEqual(['a', 'b', 'c']);
  });

  it('names nothing and writes nothing when the host set is unchanged', async () => {
    const w = await ensuredThenNodeJoins();
    await syncHosts(key, w.deps);
    w.log.clear();
    expect(await syncNodes(w.deps)).toMatchObject({ servicesToUpdate: [], changed: false });
    expect(w.log.lines('state').filter((l) => l.startsWith('state.put'))).toEqual([]);
  });

  it('warns about unusable nodes even when a service sync lists the nodes first', async () => {
    const w = inMemoryWorld({ claim });
    w.kube.nodes = [
      makeNode('a'),
      makeNode('fargate-1', { providerID: 'aws:///us-east-1a/x/fargate-ip-1' }),
    ];
    w.kube.put(makeService());
    await syncService(key, w.deps);
    await syncNodes(w.deps);
    expect(
      w.events.events.filter((e) => e.object.kind === 'Node').map((e) => e.object.name),
    ).toEqual(['fargate-1']);
  });

  it('warns about a node that cannot be a target, once', async () => {
    const w = await ensuredThenNodeJoins();
    w.kube.nodes = [
      ...w.kube.nodes,
      makeNode('fargate-1', { providerID: 'aws:///us-east-1a/x/fargate-ip-1' }),
    ];
    await syncNodes(w.deps);
    await syncNodes(w.deps);
    expect(
      w.events.events.map((e) => `${e.object.kind}/${e.object.name} ${e.type} ${e.reason}`),
    ).toEqual(['Node/fargate-1 Warning NodeNotEligibleForLoadBalancer']);
  });
});

describe('syncHosts (S16, S17)', () => {
  it('updates the LB with the stored eligible hosts and emits UpdatedLoadBalancer', async () => {
    const w = await ensuredThenNodeJoins();
    expect(await syncHosts(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.log.lines('provider')).toEqual([
      `provider.updateLoadBalancer ${key} uid=uid-1 hosts=a,b,c`,
    ]);
    expect(w.provider.balancers.get('uid-1')?.hosts).toHaveLength(3);
    expect(w.events.events).toMatchObject([
      {
        type: 'Normal',
        reason: 'UpdatedLoadBalancer',
        message: 'Updated load balancer with new hosts',
      },
    ]);
    expect(w.log.lines('kube')).not.toContain('kube.listNodes');
  });

  it('is skipped when the Service’s last-synced hosts already match', async () => {
    const w = await ensuredThenNodeJoins();
    await syncHosts(key, w.deps);
    w.log.clear();
    expect(await syncHosts(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.log.lines('provider')).toEqual([]);
  });

  it('keeps the checkpoint valid, so the next service sync makes no cloud call', async () => {
    const w = await ensuredThenNodeJoins();
    await syncHosts(key, w.deps);
    w.log.clear();
    await syncService(key, w.deps);
    expect(w.log.lines('provider')).toEqual([]);
  });

  it('warns UnAvailableLoadBalancer when the update leaves no hosts', async () => {
    const w = await ensuredThenNodeJoins();
    w.kube.nodes = [];
    await syncNodes(w.deps);
    await syncHosts(key, w.deps);
    expect(w.events.reasons()).toEqual(['Warning UnAvailableLoadBalancer']);
  });

  it('on failure of an existing LB, warns UpdateLoadBalancerFailed with the host names and retries', async () => {
    const w = await ensuredThenNodeJoins();
    w.provider.faults.failNext(
      'updateLoadBalancer',
      new RetryableError('Throttling: Rate exceeded'),
    );
    const outcome = await syncHosts(key, w.deps);
    expect(outcome.kind).toBe('retry');
    expect(w.events.events).toMatchObject([
      {
        type: 'Warning',
        reason: 'UpdateLoadBalancerFailed',
        message: 'Error updating load balancer with new hosts [a b c]: Throttling: Rate exceeded',
      },
    ]);
    // Not recorded as synced, so the retry updates again.
    w.log.clear();
    await syncHosts(key, w.deps);
    expect(w.log.lines('provider')).toHaveLength(1);
  });

  it('lists at most 20 host names in the failure message', async () => {
    const w = await ensuredThenNodeJoins();
    w.kube.nodes = Array.from({ length: 25 }, (_, i) => makeNode(`n${String(i).padStart(2, '0')}`));
    await syncNodes(w.deps);
    w.provider.faults.failNext('updateLoadBalancer', new RetryableError('boom'));
    await syncHosts(key, w.deps);
    expect(w.events.events.at(-1)?.message).toMatch(/n19 and 5 more\]: boom$/);
  });

  it('treats a failed update as no error when the LB has vanished, and has the service sync recreate it', async () => {
    const w = await ensuredThenNodeJoins();
    w.provider.balancers.clear();
    expect(await syncHosts(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.events.reasons()).not.toContain('Warning UpdateLoadBalancerFailed');
    expect(w.provider.balancers.get('uid-1')?.hosts).toHaveLength(3);
    expect((await syncNodes(w.deps)).servicesToUpdate).toEqual([]);
  });

  it('tells the user when the recreated LB has a new DNS name: a Warning with the old and new names (S17)', async () => {
    const w = await ensuredThenNodeJoins();
    w.provider.balancers.clear();
    w.events.events.length = 0;
    expect(await syncHosts(key, w.deps)).toEqual({ kind: 'done' });
    const recreated = w.events.events.find((e) => e.reason === 'RecreatedLoadBalancer');
    expect(recreated?.type).toBe('Warning');
    expect(recreated?.message).toContain(
      'from k8s-default-web.elb.us-east-1.amazonaws.com to k8s-default-web-2.elb.us-east-1.amazonaws.com',
    );
    expect(w.kube.stored('default', 'web')?.status?.loadBalancer?.ingress?.[0]?.hostname).toBe(
      'k8s-default-web-2.elb.us-east-1.amazonaws.com',
    );
  });

  it('a terminal provider error warns once, not on every node-sync pass', async () => {
    const w = await ensuredThenNodeJoins();
    w.provider.faults.failNext(
      'updateLoadBalancer',
      new TerminalError('target group would exceed 1000 targets'),
    );
    expect((await syncHosts(key, w.deps)).kind).toBe('terminal');
    expect((await syncNodes(w.deps)).servicesToUpdate).toEqual([]);
    expect(w.events.reasons()).toEqual(['Warning UpdateLoadBalancerFailed']);
  });

  it('makes no cloud call for a Service that is not ours or is gone', async () => {
    const w = await ensuredThenNodeJoins();
    w.kube.put(makeService({ name: 'other', type: 'ClusterIP' }));
    expect(await syncHosts('default/other', w.deps)).toEqual({ kind: 'done' });
    expect(await syncHosts('default/missing', w.deps)).toEqual({ kind: 'done' });
    expect(w.log.lines('provider')).toEqual([]);
  });

  it('hands a Service that is gone but still in state to the service sync, which deletes its LB', async () => {
    const w = await ensuredThenNodeJoins();
    w.kube.remove('default', 'web');
    expect(await syncHosts(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.provider.balancers.size).toBe(0);
    expect(w.state.records.has(key)).toBe(false);
  });

  it('hands a Service with cleanup pending to the service sync instead of updating its hosts', async () => {
    const w = await ensuredThenNodeJoins();
    const current = w.kube.stored('default', 'web')!;
    w.kube.put({
      ...current,
      metadata: { ...current.metadata, deletionTimestamp: '2026-11-30T12:00:00Z' },
    });
    await syncHosts(key, w.deps);
    expect(w.log.lines('provider')).toEqual([
      `provider.getLoadBalancer ${key} uid=uid-1`,
      `provider.ensureLoadBalancerDeleted ${key} uid=uid-1`,
    ]);
  });

  it('hands a Service that was never ensured to the service sync', async () => {
    const w = await ensuredThenNodeJoins();
    w.kube.put(makeService({ name: 'fresh', uid: 'uid-fresh' }));
    await syncHosts('default/fresh', w.deps);
    expect(w.provider.balancers.has('uid-fresh')).toBe(true);
  });
});
