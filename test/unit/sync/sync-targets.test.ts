import { describe, expect, it } from 'vitest';
import type { ClaimPolicy } from '../../../functions/core/claim';
import type { EndpointSliceView } from '../../../functions/core/endpoint-targets';
import { NotFoundError, RequeueAfterError, RetryableError } from '../../../functions/core/errors';
import { syncHosts } from '../../../functions/sync/sync-hosts';
import { syncService } from '../../../functions/sync/sync-service';
import { syncTargets } from '../../../functions/sync/sync-targets';
import { makeNode, makeService } from '../../../kit/core-objects';
import { inMemoryWorld } from '../../../kit/in-memory';

const claim: ClaimPolicy = { loadBalancerClass: 'x.io/nlb', claimClassless: true };
const key = 'default/web';
const ipMode = { 'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type': 'ip' };

const slice = (...ips: string[]): EndpointSliceView => ({
  addressType: 'IPv4',
  ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  endpoints: ips.map((ip) => ({ addresses: [ip], targetRef: { kind: 'Pod' } })),
});

/** A Service with pod targets, ensured with one pod; the log cleared. */
async function ensuredWithPods() {
  const w = inMemoryWorld({ claim });
  w.kube.nodes = [makeNode('a')];
  w.kube.put(makeService({ annotations: ipMode }));
  w.kube.endpointSlices.set(key, [slice('10.0.1.5')]);
  expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
  w.log.clear();
  w.events.events.length = 0;
  return w;
}

const providerCalls = (w: ReturnType<typeof inMemoryWorld>) =>
  w.log.lines('provider').map((line) => line.split(' ')[0]);

describe('syncTargets (issue 36)', () => {
  it('reads the slices live and updates only the targets, once per change', async () => {
    const w = await ensuredWithPods();
    w.kube.endpointSlices.set(key, [slice('10.0.1.5', '10.0.1.6')]);
    expect(await syncTargets(key, w.deps)).toEqual({ kind: 'done' });
    expect(providerCalls(w)).toEqual(['provider.updateEndpointTargets']);
    expect(w.provider.balancers.get('uid-1')?.pods).toEqual(['10.0.1.5:8080', '10.0.1.6:8080']);
    // The same slices again (a repeated or late message): nothing to do.
    w.log.clear();
    expect(await syncTargets(key, w.deps)).toEqual({ kind: 'done' });
    expect(providerCalls(w)).toEqual([]);
    expect(w.log.lines('kube')).toContain('kube.listEndpointSlices default/web');
  });

  it('leaves nodes out: no Node list, no host hash for node sync to act on', async () => {
    const w = inMemoryWorld({ claim });
    w.kube.put(makeService({ annotations: ipMode }));
    w.kube.endpointSlices.set(key, [slice('10.0.1.5')]);
    await syncService(key, w.deps);
    expect(w.log.lines('kube')).not.toContain('kube.listNodes');
    expect((await w.state.getService(key))?.hostsHash).toBeUndefined();
    // No nodes is no warning either: pods are the targets.
    expect(w.events.events.map((e) => e.reason)).not.toContain('UnAvailableLoadBalancer');
  });

  it('hands a Service whose spec changed since its last Ensure to a full sync', async () => {
    const w = await ensuredWithPods();
    w.kube.put(makeService({ annotations: { ...ipMode, changed: 'yes' } }));
    w.kube.endpointSlices.set(key, [slice('10.0.1.7')]);
    expect(await syncTargets(key, w.deps)).toEqual({ kind: 'done' });
    expect(providerCalls(w)).toEqual(['provider.ensureLoadBalancer']);
    expect(w.provider.balancers.get('uid-1')?.pods).toEqual(['10.0.1.7:8080']);
  });

  it('hands a Service with node targets to the service sync, which finds it in sync', async () => {
    const w = inMemoryWorld({ claim });
    w.kube.nodes = [makeNode('a')];
    w.kube.put(makeService());
    await syncService(key, w.deps);
    w.log.clear();
    expect(await syncTargets(key, w.deps)).toEqual({ kind: 'done' });
    expect(providerCalls(w)).toEqual([]);
    expect(w.log.lines('kube')).not.toContain('kube.listEndpointSlices default/web');
  });

  it('runs a full Ensure when the provider finds no pod target group recorded for a port', async () => {
    const w = await ensuredWithPods();
    w.kube.endpointSlices.set(key, [slice('10.0.1.6')]);
    w.provider.faults.failNext('updateEndpointTargets', new NotFoundError('no pod target group'));
    expect(await syncTargets(key, w.deps)).toEqual({ kind: 'done' });
    expect(providerCalls(w)).toEqual([
      'provider.updateEndpointTargets',
      'provider.ensureLoadBalancer',
    ]);
    expect(w.provider.balancers.get('uid-1')?.pods).toEqual(['10.0.1.6:8080']);
    expect((await w.state.getService(key))?.checkpoint).toBeDefined();
  });

  it('keeps what a failed update reached, warns, and diffs again next time', async () => {
    const w = await ensuredWithPods();
    w.kube.endpointSlices.set(key, [slice('10.0.1.6')]);
    w.provider.faults.failNext(
      'updateEndpointTargets',
      Object.assign(new RetryableError('throttled'), { providerState: { partial: true } }),
    );
    expect((await syncTargets(key, w.deps)).kind).toBe('retry');
    const record = await w.state.getService(key);
    expect(record?.provider).toEqual({ partial: true });
    expect(record?.targetsHash).toBeUndefined();
    expect(w.events.events.map((e) => e.reason)).toEqual(['SyncLoadBalancerFailed']);
    expect(await syncTargets(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.provider.balancers.get('uid-1')?.pods).toEqual(['10.0.1.6:8080']);
  });

  it('says nothing when the registration budget is booked ahead: the key comes back later', async () => {
    const w = await ensuredWithPods();
    w.kube.endpointSlices.set(key, [slice('10.0.1.6')]);
    w.provider.faults.failNext('updateEndpointTargets', new RequeueAfterError('budget', 3));
    expect(await syncTargets(key, w.deps)).toMatchObject({ kind: 'requeue-after', seconds: 3 });
    expect(w.events.events).toEqual([]);
  });

  it('follows the slices on a checkpoint hit of the service sync too', async () => {
    const w = await ensuredWithPods();
    w.kube.endpointSlices.set(key, [slice('10.0.1.8')]);
    expect(await syncService(key, w.deps)).toEqual({ kind: 'done' });
    expect(providerCalls(w)).toEqual(['provider.updateEndpointTargets']);
    expect(w.provider.balancers.get('uid-1')?.pods).toEqual(['10.0.1.8:8080']);
  });

  it('leaves a host update for a Service with pod targets alone: no Node list, no warning, no write', async () => {
    const w = inMemoryWorld({ claim });
    w.kube.put(makeService({ annotations: ipMode }));
    w.kube.endpointSlices.set(key, [slice('10.0.1.5')]);
    await syncService(key, w.deps);
    const before = await w.state.getService(key);
    w.log.clear();
    w.events.events.length = 0;
    expect(await syncHosts(key, w.deps)).toEqual({ kind: 'done' });
    expect(w.log.lines('kube')).not.toContain('kube.listNodes');
    expect(w.log.lines('provider')).toEqual([]);
    expect(w.events.events).toEqual([]);
    expect(await w.state.getService(key)).toEqual(before);
  });
});
