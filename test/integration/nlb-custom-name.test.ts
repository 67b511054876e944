import {
  CreateLoadBalancerCommand,
  DescribeLoadBalancersCommand,
  ElasticLoadBalancingV2Client,
  type CreateLoadBalancerCommandOutput,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { describe, expect, it } from 'vitest';
import { readNlbState } from '../../functions/nlb/nlb-state';
import { TerminalError } from '../../functions/core/errors';
import type { Service } from '../../functions/core/objects';
import type { ProviderState } from '../../functions/sync/ports';
import { makeService } from '../../kit/core-objects';
import { everythingOfWeb, useNlbProviderWorld } from '../support/nlb-provider-world';

const nameAnnotation = 'service.beta.kubernetes.io/aws-load-balancer-name';

const nlbWorld = useNlbProviderWorld();

const named = (name: string, uid = 'uid-web'): Service =>
  makeService({ uid, annotations: { [nameAnnotation]: name } });

async function loadBalancersNamed(name: string) {
  const found = await nlbWorld.cluster.testClients.elbv2.send(new DescribeLoadBalancersCommand({}));
  return (found.LoadBalancers ?? []).filter((lb) => lb.LoadBalancerName === name);
}

/** Someone else's NLB, tagged as aws-load-balancer-controller tags its own. */
async function foreignNlb(name: string): Promise<string> {
  const made = await nlbWorld.cluster.account.client(ElasticLoadBalancingV2Client).send(
    new CreateLoadBalancerCommand({
      Name: name,
      Type: 'network',
      Subnets: [...nlbWorld.cluster.subnetIds],
      Tags: [{ Key: 'service.k8s.aws/stack', Value: 'shop/checkout' }],
    }),
  );
  return made.LoadBalancers?.[0]?.LoadBalancerArn ?? '';
}

describe('aws-load-balancer-name against moto', () => {
  it('creates the NLB with the name, finds it again by the ARN in state, and changes nothing on a resync', async () => {
    const first = await nlbWorld.provider.ensureLoadBalancer(
      named('shop-web'),
      nlbWorld.cluster.hosts,
      undefined,
    );
    const state = readNlbState(first.state);
    const [lb] = await loadBalancersNamed('shop-web');
    expect(lb?.LoadBalancerArn).toBe(state.loadBalancerArn);
    expect(state.loadBalancerName).toBe('shop-web');
    expect(nlbWorld.provider.getLoadBalancerName(named('shop-web'))).toBe('shop-web');

    nlbWorld.cluster.recorder.reset();
    await nlbWorld.provider.ensureLoadBalancer(
      named('shop-web'),
      nlbWorld.cluster.hosts,
      first.state,
    );
    const calls = Object.keys(nlbWorld.cluster.recorder.byOperation());
    expect(calls.every((c) => /\.(Describe|Get)/.test(c))).toBe(true);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('keeps the NLB and its name when the annotation changes later (set at creation only)', async () => {
    const first = await nlbWorld.provider.ensureLoadBalancer(
      named('shop-web'),
      nlbWorld.cluster.hosts,
      undefined,
    );
    const again = await nlbWorld.provider.ensureLoadBalancer(
      named('shop-web-renamed'),
      nlbWorld.cluster.hosts,
      first.state,
    );
    expect(readNlbState(again.state).loadBalancerArn).toBe(
      readNlbState(first.state).loadBalancerArn,
    );
    expect(again.status).toEqual(first.status);
    expect(await loadBalancersNamed('shop-web-renamed')).toEqual([]);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('refuses a name another controller’s NLB holds, naming the holder, and never touches it', async () => {
    const arn = await foreignNlb('shop-web');
    const attempt = nlbWorld.provider.ensureLoadBalancer(
      named('shop-web'),
      nlbWorld.cluster.hosts,
      undefined,
    );
    await expect(attempt).rejects.toThrow(TerminalError);
    await expect(attempt).rejects.toThrow(
      /not owned by this Service.*aws-load-balancer-controller's Service shop\/checkout/,
    );
    // What the refused sync made (its security group) is ours and goes; the foreign NLB stays.
    await nlbWorld.provider.ensureLoadBalancerDeleted(named('shop-web'), undefined);
    expect((await loadBalancersNamed('shop-web')).map((lb) => lb.LoadBalancerArn)).toEqual([arn]);
    nlbWorld.expectedLeft = [];
  });

  it('refuses a name another Service of this controller holds', async () => {
    await nlbWorld.provider.ensureLoadBalancer(
      named('shared-name', 'uid-first'),
      nlbWorld.cluster.hosts,
      undefined,
    );
    const other = makeService({
      name: 'api',
      uid: 'uid-second',
      annotations: { [nameAnnotation]: 'shared-name' },
    });
    await expect(
      nlbWorld.provider.ensureLoadBalancer(other, nlbWorld.cluster.hosts, undefined),
    ).rejects.toThrow(/belongs to this controller's Service default\/web \(UID uid-first\)/);
    await nlbWorld.provider.ensureLoadBalancerDeleted(other, undefined);
    expect(await loadBalancersNamed('shared-name')).toHaveLength(1);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  /**
   * AWS answers CreateLoadBalancer for a name that exists with the same settings by handing the
   * existing NLB back (moto makes a second one instead). The hook plays AWS here: an NLB of the
   * name appears after the provider looked, and CreateLoadBalancer returns it.
   */
  it('refuses an NLB that CreateLoadBalancer hands back when it is not ours, recording nothing of it', async () => {
    let foreignArn = '';
    nlbWorld.cluster.clients.elbv2.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName !== 'CreateLoadBalancerCommand') return next(args);
        foreignArn = await foreignNlb('raced-name');
        const [existing] = await loadBalancersNamed('raced-name');
        const output: CreateLoadBalancerCommandOutput = {
          LoadBalancers: existing === undefined ? [] : [existing],
          $metadata: {},
        };
        return { output, response: {} };
      },
      { step: 'initialize', name: 'awsReturnsTheExistingLoadBalancer' },
    );
    let state: ProviderState | undefined;
    try {
      await nlbWorld.provider.ensureLoadBalancer(
        named('raced-name'),
        nlbWorld.cluster.hosts,
        undefined,
      );
      expect.unreachable('the foreign NLB was accepted');
    } catch (error) {
      expect(error).toBeInstanceOf(TerminalError);
      expect(String(error)).toMatch(
        /name raced-name .* is already taken by .*aws-load-balancer-controller's Service shop\/checkout/,
      );
      state = (error as { providerState?: ProviderState }).providerState;
    }
    expect(readNlbState(state).loadBalancerArn).toBeUndefined();
    nlbWorld.cluster.clients.elbv2.middlewareStack.remove('awsReturnsTheExistingLoadBalancer');
    await nlbWorld.provider.ensureLoadBalancerDeleted(named('raced-name'), state);
    expect((await loadBalancersNamed('raced-name')).map((lb) => lb.LoadBalancerArn)).toEqual([
      foreignArn,
    ]);
    nlbWorld.expectedLeft = [];
  });

  it('deletes a custom-named NLB by the ARN in state, and by tags when state was lost', async () => {
    const first = await nlbWorld.provider.ensureLoadBalancer(
      named('shop-web'),
      nlbWorld.cluster.hosts,
      undefined,
    );
    await nlbWorld.provider.ensureLoadBalancerDeleted(named('shop-web'), first.state);
    expect(await loadBalancersNamed('shop-web')).toEqual([]);

    await nlbWorld.provider.ensureLoadBalancer(
      named('shop-web-2'),
      nlbWorld.cluster.hosts,
      undefined,
    );
    await nlbWorld.provider.ensureLoadBalancerDeleted(named('shop-web-2'), undefined);
    expect(await loadBalancersNamed('shop-web-2')).toEqual([]);
    nlbWorld.expectedLeft = [];
  });
});
