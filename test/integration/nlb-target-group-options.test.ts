import {
  DescribeTargetGroupAttributesCommand,
  ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { describe, expect, it } from 'vitest';
import { readNlbState } from '../../functions/nlb/nlb-state';
import type { ProviderState } from '../../functions/sync/ports';
import { makeService } from '../../kit/core-objects';
import { useNlbProviderWorld } from '../support/nlb-provider-world';

const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;

const nlbWorld = useNlbProviderWorld();

/** One target group attribute of each target group, by Service port. */
async function attribute(
  state: ProviderState,
  key: string,
): Promise<Record<string, string | undefined>> {
  const reader = nlbWorld.cluster.account.client(ElasticLoadBalancingV2Client);
  const result: Record<string, string | undefined> = {};
  for (const [port, tg] of Object.entries(readNlbState(state).targetGroups ?? {})) {
    const found = await reader.send(
      new DescribeTargetGroupAttributesCommand({ TargetGroupArn: tg.arn }),
    );
    result[port] = found.Attributes?.find((a) => a.Key === key)?.Value;
  }
  return result;
}

const proxyProtocol = (state: ProviderState) => attribute(state, 'proxy_protocol_v2.enabled');

describe('aws-load-balancer-proxy-protocol-per-target-group against moto', () => {
  it('turns proxy protocol on for the listed Service ports and off for the others, and follows a change', async () => {
    const svc = (ports: string) =>
      makeService({
        uid: 'uid-web',
        annotations: { [aws('proxy-protocol-per-target-group')]: ports },
      });
    const first = await nlbWorld.provider.ensureLoadBalancer(
      svc('443'),
      nlbWorld.cluster.hosts,
      undefined,
    );
    expect(await proxyProtocol(first.state)).toEqual({ '80': 'false', '443': 'true' });
    const second = await nlbWorld.provider.ensureLoadBalancer(
      svc('80'),
      nlbWorld.cluster.hosts,
      first.state,
    );
    expect(await proxyProtocol(second.state)).toEqual({ '80': 'true', '443': 'false' });
    await nlbWorld.provider.ensureLoadBalancerDeleted(svc('80'), second.state);
  });

  it('gives way to aws-load-balancer-proxy-protocol: "*", as in aws-load-balancer-controller', async () => {
    const svc = makeService({
      uid: 'uid-web',
      annotations: {
        [aws('proxy-protocol-per-target-group')]: '443',
        [aws('proxy-protocol')]: '*',
      },
    });
    const made = await nlbWorld.provider.ensureLoadBalancer(svc, nlbWorld.cluster.hosts, undefined);
    expect(await proxyProtocol(made.state)).toEqual({ '80': 'true', '443': 'true' });
    await nlbWorld.provider.ensureLoadBalancerDeleted(svc, made.state);
  });
});

describe('aws-load-balancer-target-group-attributes.<port> against moto', () => {
  it('sets one port’s target group over the annotation for all ports, and passes the NLB-only keys through', async () => {
    const svc = makeService({
      uid: 'uid-web',
      annotations: {
        [aws('target-group-attributes')]:
          'deregistration_delay.timeout_seconds=30,target_health_state.unhealthy.connection_termination.enabled=false',
        [aws('target-group-attributes.443')]:
          'deregistration_delay.timeout_seconds=120,target_health_state.unhealthy.draining_interval_seconds=600',
      },
    });
    const made = await nlbWorld.provider.ensureLoadBalancer(svc, nlbWorld.cluster.hosts, undefined);
    expect(await attribute(made.state, 'deregistration_delay.timeout_seconds')).toEqual({
      '80': '30',
      '443': '120',
    });
    expect(
      await attribute(made.state, 'target_health_state.unhealthy.connection_termination.enabled'),
    ).toEqual({ '80': 'false', '443': 'false' });
    expect(
      await attribute(made.state, 'target_health_state.unhealthy.draining_interval_seconds'),
    ).toMatchObject({ '443': '600' });
    // A resync finds everything in place: no write.
    nlbWorld.cluster.recorder.reset();
    await nlbWorld.provider.ensureLoadBalancer(svc, nlbWorld.cluster.hosts, made.state);
    expect(
      Object.keys(nlbWorld.cluster.recorder.byOperation()).every((c) => /\.Describe/.test(c)),
    ).toBe(true);
    await nlbWorld.provider.ensureLoadBalancerDeleted(svc, made.state);
  });
});
