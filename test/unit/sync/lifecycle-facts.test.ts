import { describe, expect, it } from 'vitest';
import type { ClaimPolicy } from '../../../functions/core/claim';
import { RetryableError, TerminalError } from '../../../functions/core/errors';
import { syncHosts } from '../../../functions/sync/sync-hosts';
import { syncNodes } from '../../../functions/sync/sync-nodes';
import { syncService } from '../../../functions/sync/sync-service';
import { makeNode, makeService, type ServiceOptions } from '../../../kit/core-objects';
import { inMemoryWorld } from '../../../kit/in-memory';

const claim: ClaimPolicy = { loadBalancerClass: 'x.io/nlb', claimClassless: true };
const key = 'default/web';

/** Prepare: two nodes, one Service, ensured once; the lifecycle facts of that first sync cleared. */
async function ensured(options: ServiceOptions = {}) {
  const w = inMemoryWorld({ claim });
  const a = makeNode('a');
  const b = makeNode('b');
  w.kube.nodes = [a, b];
  w.kube.put(makeService(options));
  await syncService(key, w.deps);
  const first = [...w.lifecycle.facts];
  w.lifecycle.facts.length = 0;
  w.lifecycle.subjects.length = 0;
  return { ...w, first, nodes: { a, b } };
}

const instanceOf = (node: ReturnType<typeof makeNode>) =>
  node.spec?.providerID?.split('/').at(-1) ?? '';

describe('lifecycle facts from the use cases (only on state changes)', () => {
  it('announces a new LB once, with its summary; the host set a service sync stores is not announced', async () => {
    const w = await ensured();
    expect(w.first.map((f) => f.type)).toEqual(['Ensured']);
    expect(w.first[0]?.detail).toMatchObject({
      loadBalancerId: 'arn:fake:k8s-default-web',
      dnsName: 'k8s-default-web.elb.us-east-1.amazonaws.com',
    });
  });

  it('says nothing for a sync with nothing to do: checkpoint hit, or a forced resync of an unchanged LB', async () => {
    const w = await ensured();
    await syncService(key, w.deps);
    await syncService(key, w.deps, { ignoreCheckpoint: true });
    expect(w.lifecycle.facts).toEqual([]);
  });

  it('says nothing for a label-only change', async () => {
    const w = await ensured();
    const live = w.kube.stored('default', 'web');
    w.kube.put({ ...live, metadata: { ...live?.metadata, labels: { team: 'payments' } } });
    await syncService(key, w.deps);
    expect(w.lifecycle.facts).toEqual([]);
  });

  it('announces again when the LB changes shape (the fake provider’s shape covers annotations)', async () => {
    const w = await ensured();
    const live = w.kube.stored('default', 'web');
    w.kube.put({
      ...live,
      metadata: { ...live?.metadata, annotations: { 'example.com/idle-timeout': '60' } },
    });
    await syncService(key, w.deps);
    expect(w.lifecycle.lines()).toEqual(['Ensured default/web']);
  });

  it('announces a pass that finishes an earlier failed one, even when the last pass changed nothing itself', async () => {
    const w = inMemoryWorld({ claim });
    w.kube.nodes = [makeNode('a')];
    w.kube.put(makeService());
    w.provider.failAfterCreate = new RetryableError('throttled after create');
    expect((await syncService(key, w.deps)).kind).toBe('retry');
    expect(w.lifecycle.lines()).toEqual([]);
    await syncService(key, w.deps);
    expect(w.lifecycle.lines()).toEqual(['Ensured default/web']);
  });

  it('waits for a provisioning NLB before announcing it', async () => {
    const w = inMemoryWorld({ claim });
    w.kube.nodes = [makeNode('a')];
    w.kube.put(makeService());
    w.provider.ensuresProvisioning = 1;
    expect((await syncService(key, w.deps)).kind).toBe('requeue-after');
    expect(w.lifecycle.lines()).toEqual([]);
    await syncService(key, w.deps);
    expect(w.lifecycle.lines()).toEqual(['Ensured default/web']);
  });

  it('node sync announces the eligible instances added and removed; a host update names the LB’s target changes', async () => {
    const w = await ensured();
    const c = makeNode('c');
    w.kube.nodes = [w.nodes.a, c];
    await syncNodes(w.deps);
    await syncHosts(key, w.deps);
    expect(w.lifecycle.lines()).toEqual(['NodeSetChanged', 'HostsUpdated default/web']);
    const expected = { added: [instanceOf(c)], removed: [instanceOf(w.nodes.b)] };
    expect(w.lifecycle.facts[0]?.detail).toEqual({ ...expected, eligibleHosts: 2 });
    expect(w.lifecycle.facts[1]?.detail).toEqual(expected);
  });

  it('a node change that leaves the eligible instances as they were announces nothing', async () => {
    const w = await ensured();
    const excluded = { 'node.kubernetes.io/exclude-from-external-load-balancers': 'true' };
    w.kube.nodes = [w.nodes.a, w.nodes.b, makeNode('excluded', { labels: excluded })];
    await syncNodes(w.deps);
    await syncHosts(key, w.deps);
    expect(w.lifecycle.facts).toEqual([]);
  });

  it('announces the deletion of a Service that is gone, with the deleted LB', async () => {
    const w = await ensured();
    w.kube.remove('default', 'web');
    await syncService(key, w.deps);
    expect(w.lifecycle.lines()).toEqual(['Deleted default/web']);
    expect(w.lifecycle.facts[0]?.detail).toEqual({ loadBalancerId: 'arn:fake:k8s-default-web' });
  });

  it('announces the deletion when a Service stops wanting an LB, and not for one that never had one', async () => {
    const w = await ensured();
    const live = w.kube.stored('default', 'web');
    w.kube.put({ ...live, spec: { ...live?.spec, type: 'ClusterIP' } });
    await syncService(key, w.deps);
    expect(w.lifecycle.lines()).toEqual(['Deleted default/web']);

    const never = inMemoryWorld({ claim });
    never.kube.put(makeService({ type: 'ClusterIP' }));
    await syncService(key, never.deps);
    expect(never.lifecycle.facts).toEqual([]);
  });

  it('a slow delete is announced once, when it finishes', async () => {
    const w = await ensured();
    w.provider.deletesStillInUse = 1;
    w.kube.remove('default', 'web');
    expect((await syncService(key, w.deps)).kind).toBe('requeue-after');
    expect(w.lifecycle.facts).toEqual([]);
    await syncService(key, w.deps);
    expect(w.lifecycle.lines()).toEqual(['Deleted default/web']);
  });

  it('names the Service it read, so a failure can carry its UID', async () => {
    const w = await ensured();
    await syncService(key, w.deps);
    expect(w.lifecycle.subjects).toEqual([`${key} uid-1`]);
  });

  it('after a re-creation with a new UID, the rest of the pass is about the new Service', async () => {
    const w = await ensured();
    w.kube.put(makeService({ uid: 'uid-2' }));
    w.provider.faults.failNext('ensureLoadBalancer', new RetryableError('throttled'));
    expect((await syncService(key, w.deps)).kind).toBe('retry');
    expect(w.lifecycle.lines()).toEqual(['Deleted default/web']);
    expect(w.lifecycle.subjects.at(-1)).toBe(`${key} uid-2`);
  });

  it('a Service whose LB was never created (invalid from the start) is not announced as deleted', async () => {
    const w = inMemoryWorld({ claim });
    w.kube.nodes = [makeNode('a')];
    w.kube.put(makeService());
    w.provider.faults.failNext('ensureLoadBalancer', new TerminalError('bad annotation'));
    expect((await syncService(key, w.deps)).kind).toBe('terminal');
    w.kube.remove('default', 'web');
    expect((await syncService(key, w.deps)).kind).toBe('done');
    expect(w.lifecycle.facts).toEqual([]);
  });

  it('keeps the deleted LB’s ARN for a Deleted announced by a later pass (the finalizer removal failed)', async () => {
    const w = await ensured();
    const live = w.kube.stored('default', 'web');
    w.kube.put({ ...live, spec: { ...live?.spec, type: 'ClusterIP' } });
    w.kube.faults.failNext('removeFinalizer', new RetryableError('API server unavailable'));
    expect((await syncService(key, w.deps)).kind).toBe('retry');
    expect(w.lifecycle.facts).toEqual([]);
    expect((await syncService(key, w.deps)).kind).toBe('done');
    expect(w.lifecycle.facts).toEqual([
      { type: 'Deleted', key, detail: { loadBalancerId: 'arn:fake:k8s-default-web' } },
    ]);
  });

  it('announces targets moved by a pass that then failed, when a later pass completes', async () => {
    const w = await ensured();
    const c = makeNode('c');
    w.kube.nodes = [...w.kube.nodes, c];
    await syncNodes(w.deps);
    w.lifecycle.facts.length = 0;
    const live = w.kube.stored('default', 'web');
    w.kube.put({ ...live, metadata: { ...live?.metadata, annotations: { 'x.io/a': '1' } } });
    // The fake registers the new hosts, then fails, as a throttled ModifyListener would.
    w.provider.failAfterCreate = new RetryableError('throttled after registering');
    expect((await syncService(key, w.deps)).kind).toBe('retry');
    expect(w.lifecycle.facts).toEqual([]);
    expect((await syncService(key, w.deps)).kind).toBe('done');
    expect(w.lifecycle.lines()).toEqual(['Ensured default/web', 'HostsUpdated default/web']);
    expect(w.lifecycle.facts[1]?.detail).toEqual({ added: [instanceOf(c)], removed: [] });
  });

  it('a record from before the feed existed sets the baseline silently on its next resync', async () => {
    const w = await ensured();
    const record = w.state.records.get(key);
    const { announced: _, ...older } = record!;
    w.state.records.set(key, older);
    await syncService(key, w.deps, { ignoreCheckpoint: true });
    expect(w.lifecycle.facts).toEqual([]);
    expect(w.state.records.get(key)?.announced?.shape).toBeDefined();
  });

  it('node sync announces the first host set it stores, and service syncs never do', async () => {
    const w = inMemoryWorld({ claim });
    w.kube.nodes = [makeNode('a'), makeNode('b')];
    await syncNodes(w.deps);
    expect(w.lifecycle.lines()).toEqual(['NodeSetChanged']);
    expect(w.lifecycle.facts[0]?.detail).toMatchObject({ removed: [], eligibleHosts: 2 });
  });
});
