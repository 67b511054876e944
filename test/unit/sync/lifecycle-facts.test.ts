import { describe, expect, it } from 'vitest';
import type { ClaimPolicy } from '../../../functions/core/claim';
import { RetryableError } from '../../../functions/core/errors';
import { syncHosts } from '../../../functions/sync/sync-hosts';
import { syncNodes } from '../../../functions/sync/sync-nodes';
import { syncService } from '../../../functions/sync/sync-service';
import { makeNode, makeService, type ServiceOptions } from '../../support/core-objects';
import { inMemoryWorld } from '../../support/in-memory';

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
  it('announces a new LB once, with its summary; the node set stored on the way is announced too', async () => {
    const w = await ensured();
    expect(w.first.map((f) => f.type)).toEqual(['NodeSetChanged', 'Ensured']);
    expect(w.first[1]?.detail).toMatchObject({
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

  it('announces again when the LB changes shape (an annotation the provider reads)', async () => {
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
    expect(w.lifecycle.lines()).toEqual(['NodeSetChanged']);
    await syncService(key, w.deps);
    expect(w.lifecycle.lines()).toEqual(['NodeSetChanged', 'Ensured default/web']);
  });

  it('waits for a provisioning NLB before announcing it', async () => {
    const w = inMemoryWorld({ claim });
    w.kube.nodes = [makeNode('a')];
    w.kube.put(makeService());
    w.provider.ensuresProvisioning = 1;
    expect((await syncService(key, w.deps)).kind).toBe('requeue-after');
    expect(w.lifecycle.lines()).toEqual(['NodeSetChanged']);
    await syncService(key, w.deps);
    expect(w.lifecycle.lines()).toEqual(['NodeSetChanged', 'Ensured default/web']);
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
    expect(w.lifecycle.subjects).toEqual([key]);
  });
});
