/**
 * A forwarder refused its watches (its RBAC lost: a 403 on every list and watch) keeps beating,
 * and retries for ever. What tells anyone: the heartbeat's watch figures (which the
 * ForwarderWatchesFailing alarm reads, test/infra/monitoring.test.ts) and `/healthz`, which fails
 * after `unhealthyAfterWatchFailures` failures in a row so the kubelet restarts the pod. Run
 * against the fake API server enforcing the project's RBAC, with the refusal switched on and off.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Forwarder } from '../../functions/forwarder/forwarder';
import { FakeKubeApiServer, type Authorizer } from '../../functions/local/fake-kube';
import { loadProjectRbac } from '../../functions/local/project-rbac';
import type { WorkMessage } from '../../functions/contract/work-messages';
import { loadBalancerService } from '../support/kube-objects';

type Heartbeat = Extract<WorkMessage, { kind: 'heartbeat' }>;

const claim = { loadBalancerClass: 'serverless-service-controller.io/nlb', claimClassless: true };
const rbac = loadProjectRbac();

let kube: FakeKubeApiServer;
let forwarder: Forwarder | undefined;
/** While set, the forwarder may neither list nor watch that resource, as after a rule is lost. */
let revoked: 'services' | 'endpointslices' | undefined;
const heartbeats: Heartbeat[] = [];
const forwarded: string[] = [];

const authorizer: Authorizer = {
  authorize: (user, request) =>
    revoked !== undefined &&
    user.name === rbac.forwarder.name &&
    request.isResourceRequest &&
    request.resource === revoked
      ? {
          allowed: false,
          message: `${revoked} is forbidden: User "${user.name}" cannot ${request.verb} resource "${revoked}"`,
        }
      : rbac.authorizer.authorize(user, request),
};

/** While set, every backoff waits for `step()`: the test decides when the next attempt is made. */
let gated = false;
const sleepers: (() => void)[] = [];
function step() {
  for (const wake of sleepers.splice(0)) wake();
}

function startForwarder(options: { unhealthyAfterWatchFailures?: number } = {}) {
  forwarder = new Forwarder({
    kubeConfig: kube.kubeConfig({ as: rbac.forwarder }),
    claim,
    nodePolicy: 'stable',
    // eslint-disable-next-line @typescript-eslint/require-await -- the queue's shape
    send: async (messages) => {
      for (const m of messages) {
        if (m.kind === 'heartbeat') heartbeats.push(m);
        else forwarded.push(`${m.kind} ${'key' in m ? m.key : ''}`);
      }
    },
    // The watch's backoff, shortened: the count of failures is what is under test.
    sleep: (ms) =>
      new Promise((resolve) => {
        if (gated) sleepers.push(resolve);
        else setTimeout(resolve, Math.min(ms, 20));
      }),
    heartbeatSeconds: 0.1,
    ...options,
  });
  forwarder.start();
  return forwarder;
}

beforeEach(async () => {
  revoked = undefined;
  heartbeats.length = 0;
  forwarded.length = 0;
  kube = await FakeKubeApiServer.start({ rbac: authorizer });
});

afterEach(async () => {
  gated = false;
  step();
  await forwarder?.stop(1000);
  forwarder = undefined;
  await kube.stop();
});

describe('a forwarder whose watch is refused', () => {
  it('says so in its heartbeats: the failed lists and watches once each, the failing watch at every one', async () => {
    revoked = 'services';
    const running = startForwarder();
    await vi.waitFor(() => expect(running.services.restarts).toBeGreaterThanOrEqual(3));
    await vi.waitFor(() =>
      expect(heartbeats.filter((h) => (h.failingWatches ?? 0) > 0).length).toBeGreaterThan(2),
    );
    // Nodes are still seen; Services are not, nor EndpointSlices (listed once the Services are),
    // and the heartbeat goes on all the same.
    expect(running.nodes.consecutiveFailures).toBe(0);
    expect(running.slices.ready).toBe(false);
    expect(heartbeats.at(-1)?.failingWatches).toBe(2);
    expect(kube.denials.every((d) => d.request.verb === 'list')).toBe(true);

    revoked = undefined;
    await vi.waitFor(() => expect(running.ready).toBe(true));
    const recoveredAt = heartbeats.length;
    await vi.waitFor(() => expect(heartbeats.length).toBeGreaterThan(recoveredAt + 2));
    expect(heartbeats.slice(recoveredAt + 1).map((h) => h.failingWatches)).toEqual(
      heartbeats.slice(recoveredAt + 1).map(() => 0),
    );
    // Every failure is reported, by one heartbeat only.
    const reported = heartbeats.reduce((sum, h) => sum + (h.watchFailures ?? 0), 0);
    expect(reported).toBe(running.watchFailures);
    expect(reported).toBeGreaterThanOrEqual(3);
    // And the Services it missed are forwarded once it lists them.
    await kube
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespacedService({
        namespace: 'default',
        body: loadBalancerService('web'),
      });
    await vi.waitFor(() => expect(forwarded).toContain('service default/web'));
    kube.denials.length = 0;
  });

  it('fails /healthz after unhealthyAfterWatchFailures failures in a row, and recovers once it lists again', async () => {
    revoked = 'services';
    gated = true;
    const running = startForwarder({ unhealthyAfterWatchFailures: 5 });
    const port = await running.listen(0, '127.0.0.1');
    const health = async () => {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`);
      return `${response.status} ${(await response.text()).trim()}`;
    };
    // Failing, but not yet for long: an API server's restart must not restart the pod.
    for (let failures = 1; failures < 5; failures++) {
      await vi.waitFor(() => expect(running.services.consecutiveFailures).toBe(failures));
      expect(await health()).toBe('200 ok');
      step();
    }
    await vi.waitFor(() => expect(running.services.consecutiveFailures).toBe(5));
    expect(await health()).toBe('503 the services list or watch has failed 5 times in a row');
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toContain('forwarder_watch_consecutive_failures{resource="services"} 5');
    expect(metrics).toContain('forwarder_watch_consecutive_failures{resource="nodes"} 0');

    revoked = undefined;
    gated = false;
    step();
    await vi.waitFor(async () => expect(await health()).toBe('200 ok'));
    expect(running.services.consecutiveFailures).toBe(0);
    expect(running.ready).toBe(true);
    kube.denials.length = 0;
  });

  it('a watch that ends or breaks and opens again is not failing', async () => {
    const running = startForwarder({ unhealthyAfterWatchFailures: 1 });
    await vi.waitFor(() => expect(running.ready).toBe(true));
    await vi.waitFor(() => expect(kube.openWatches).toBe(3));
    const port = await running.listen(0, '127.0.0.1');
    for (let i = 1; i <= 3; i++) {
      kube.resetWatches();
      await vi.waitFor(() => expect(running.services.restarts).toBe(i));
      await vi.waitFor(() => expect(kube.openWatches).toBe(3));
      await vi.waitFor(() => expect(running.failingWatches).toBe(0));
    }
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    expect(running.failingWatches).toBe(0);
  });

  it('counts a refused EndpointSlice watch as it counts the others: heartbeats, /healthz, /readyz', async () => {
    revoked = 'endpointslices';
    const running = startForwarder({ unhealthyAfterWatchFailures: 3 });
    const port = await running.listen(0, '127.0.0.1');
    const get = async (path: string) => {
      const response = await fetch(`http://127.0.0.1:${port}${path}`);
      return `${response.status} ${(await response.text()).trim()}`;
    };
    await vi.waitFor(() => expect(running.slices.consecutiveFailures).toBeGreaterThanOrEqual(3));
    await vi.waitFor(() => expect(heartbeats.at(-1)?.failingWatches).toBe(1));
    expect(running.services.consecutiveFailures).toBe(0);
    expect(await get('/healthz')).toMatch(
      /^503 the endpointslices list or watch has failed \d+ times in a row$/,
    );
    expect(await get('/readyz')).toBe('503 listing');
    const metrics = await get('/metrics');
    expect(metrics).toMatch(
      /forwarder_watch_consecutive_failures\{resource="endpointslices"\} [1-9]/,
    );
    expect(
      kube.denials.every(
        (d) => d.request.isResourceRequest && d.request.resource === 'endpointslices',
      ),
    ).toBe(true);

    revoked = undefined;
    await vi.waitFor(async () => expect(await get('/healthz')).toBe('200 ok'));
    await vi.waitFor(() => expect(running.ready).toBe(true));
    await vi.waitFor(() => expect(heartbeats.at(-1)?.failingWatches).toBe(0));
    kube.denials.length = 0;
  });
});
