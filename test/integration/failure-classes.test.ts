/**
 * Errors by what fixes them (docs/design.md §4): a quota, a permission or a missing dependency is
 * not the spec's fault, so it is retried with capped backoff, counted by class, and recovers once
 * fixed, with no spec change. Only a wrong spec is terminal.
 */
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { CreateTagsCommand, DeleteTagsCommand, EC2Client } from '@aws-sdk/client-ec2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runSweep } from '../../functions/runtime/sweep';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { serviceLeasePk, servicePk } from '../../functions/state/table-layout';

const key = 'default/web';
let world: RuntimeWorld;

beforeEach(async () => {
  world = await createRuntimeWorld();
  await world.api.createNamespacedService({
    namespace: 'default',
    body: loadBalancerService('web'),
  });
});

afterEach(async () => {
  await world.stop();
});

/** Handles the key's message until it is acknowledged, waiting out each requested delay. */
async function untilAcknowledged(maxRounds = 6): Promise<number> {
  for (let round = 1; round <= maxRounds; round++) {
    const { records, result } = await world.handleOnce(world.config.backoffBaseSeconds * 4 + 1);
    if (records.length > 0 && result.batchItemFailures.length === 0) return round;
  }
  throw new Error('the message was never acknowledged');
}

async function hostname(): Promise<string | undefined> {
  const service = await world.api.readNamespacedService({ name: 'web', namespace: 'default' });
  return service.status?.loadBalancer?.ingress?.[0]?.hostname;
}

async function warnings(): Promise<string[]> {
  const events = await world.api.listNamespacedEvent({ namespace: 'default' });
  return events.items.filter((e) => e.type === 'Warning').map((e) => e.message ?? '');
}

describe('failures that someone else must fix are retried, counted by class, and recover', () => {
  it.each([
    ['TooManyLoadBalancers', 'quota'],
    ['AccessDenied', 'permission'],
    ['InsufficientFreeAddressesInSubnet', 'capacity'],
  ])(
    'CreateLoadBalancer answering %s twice, then success, converges with no spec change (%s)',
    async (code, failureClass) => {
      world.aws.recorder.injectFault({
        service: 'ElasticLoadBalancingV2',
        operation: 'CreateLoadBalancer',
        kind: 'error',
        code,
        times: 2,
      });
      await world.send({ v: 1, kind: 'service', key });
      expect(await untilAcknowledged()).toBe(3);

      expect(await hostname()).toBeTruthy();
      expect(world.metrics.get(`RetryableFailures{class=${failureClass}}`)).toBe(2);
      expect(world.metrics.get('Syncs{outcome=terminal,kind=service}')).toBe(0);
      expect((await warnings()).some((m) => m.includes(code))).toBe(true);
      // The key's failure count was reset by the success.
      expect(Number((await world.runtime.store.getItem(serviceLeasePk(key)))?.failures ?? 0)).toBe(
        0,
      );
    },
  );

  it('a Kubernetes 403 on the status write is a permission failure, retried until RBAC is fixed', async () => {
    world.kube.failNextRequests(2, 403, { method: 'PATCH', path: /\/status$/ });
    await world.send({ v: 1, kind: 'service', key });
    expect(await untilAcknowledged()).toBe(3);
    expect(await hostname()).toBeTruthy();
    expect(world.metrics.get('RetryableFailures{class=permission}')).toBe(2);
  });

  it('subnets not tagged for the load balancer are a dependency failure: tagging them is enough', async () => {
    const ec2 = world.aws.account.client(EC2Client);
    const untag = {
      Resources: [...world.aws.subnetIds],
      Tags: [{ Key: 'kubernetes.io/role/internal-elb' }],
    };
    await ec2.send(new DeleteTagsCommand(untag));
    await world.send({ v: 1, kind: 'service', key });
    const { result } = await world.handleOnce();
    expect(result.batchItemFailures).toHaveLength(1);
    expect(world.metrics.get('RetryableFailures{class=dependency}')).toBe(1);
    await ec2.send(
      new CreateTagsCommand({
        ...untag,
        Tags: [{ Key: 'kubernetes.io/role/internal-elb', Value: '1' }],
      }),
    );
    expect(await untilAcknowledged()).toBeGreaterThan(0);
    expect(await hostname()).toBeTruthy();
  });

  it('a terminal outcome ends the retries: the failure count goes, so the sweep neither re-drives the key nor repeats its Warning', async () => {
    // The first pass fails for a moment (the API server), the second finds the spec wrong.
    await world.api.patchNamespacedService(
      { name: 'web', namespace: 'default', body: { spec: { loadBalancerIP: '10.0.0.5' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    world.kube.failNextRequests(1, 503, { method: 'GET', path: /\/services\/web$/ });
    await world.send({ v: 1, kind: 'service', key });
    expect(await untilAcknowledged()).toBe(2);
    expect(world.metrics.get('Syncs{outcome=terminal,kind=service}')).toBe(1);
    expect(await world.runtime.store.getItem(servicePk(key))).toBeUndefined();
    expect(await runSweep(world.runtime)).toMatchObject({ resyncs: 0, redriven: 0 });
    expect((await warnings()).filter((m) => m.includes('loadBalancerIP'))).toHaveLength(1);
  });

  it('a wrong spec stays terminal: no retry, a Warning, and no failure counted by class', async () => {
    await world.api.patchNamespacedService(
      {
        name: 'web',
        namespace: 'default',
        body: {
          metadata: {
            annotations: {
              'service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval': 'soon',
            },
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await world.send({ v: 1, kind: 'service', key });
    expect(await untilAcknowledged()).toBe(1);
    expect(world.metrics.get('Syncs{outcome=terminal,kind=service}')).toBe(1);
    expect((await warnings()).some((m) => m.includes('healthcheck-interval'))).toBe(true);
    expect([...world.metrics.counts.keys()].some((k) => k.startsWith('RetryableFailures'))).toBe(
      false,
    );
  });
});
