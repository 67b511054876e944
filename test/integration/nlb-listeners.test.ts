import { ACMClient, RequestCertificateCommand } from '@aws-sdk/client-acm';
import {
  DescribeListenerAttributesCommand,
  DescribeListenersCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { describe, expect, it } from 'vitest';
import { readNlbState } from '../../functions/nlb/nlb-state';
import { TerminalError } from '../../functions/core/errors';
import type { Service } from '../../functions/core/objects';
import type { ProviderState } from '../../functions/sync/ports';
import { makeService } from '../../kit/core-objects';
import { useNlbProviderWorld } from '../support/nlb-provider-world';

/**
 * Listener options against moto (issue 20, items 4 and 8): the ALPN policy on CreateListener and
 * listener attributes through Describe/ModifyListenerAttributes, which moto implements. moto
 * refuses ModifyListener on TLS listeners (AWS accepts it), so a changed ALPN policy on an
 * existing listener is covered by test/unit/aws/listener-options.test.ts instead.
 */
const prefix = 'service.beta.kubernetes.io/aws-load-balancer-';

const nlbWorld = useNlbProviderWorld();

const service = (annotations: Record<string, string>): Service =>
  makeService({ uid: 'uid-listeners', annotations });
const ensure = (svc: Service, state?: ProviderState) =>
  nlbWorld.provider.ensureLoadBalancer(svc, nlbWorld.cluster.hosts, state);
const writes = () =>
  Object.keys(nlbWorld.cluster.recorder.byOperation()).filter((op) => !/\.(Describe|Get)/.test(op));

async function listeners(state: ProviderState) {
  const found = await nlbWorld.cluster.testClients.elbv2.send(
    new DescribeListenersCommand({ LoadBalancerArn: readNlbState(state).loadBalancerArn }),
  );
  return (found.Listeners ?? []).sort((a, b) => (a.Port ?? 0) - (b.Port ?? 0));
}

async function idleTimeouts(state: ProviderState): Promise<Record<number, string | undefined>> {
  const result: Record<number, string | undefined> = {};
  for (const listener of await listeners(state)) {
    const found = await nlbWorld.cluster.testClients.elbv2.send(
      new DescribeListenerAttributesCommand({ ListenerArn: listener.ListenerArn }),
    );
    result[listener.Port ?? 0] = found.Attributes?.find(
      (a) => a.Key === 'tcp.idle_timeout.seconds',
    )?.Value;
  }
  return result;
}

async function cleanUp(svc: Service, state: ProviderState) {
  const deleted = await nlbWorld.provider.ensureLoadBalancerDeleted(svc, state);
  expect(deleted.requeueAfterSeconds).toBeUndefined();
}

describe('listener attributes against moto', () => {
  const idle = (port: string, seconds: number) =>
    service({
      [`${prefix}listener-attributes.TCP-${port}`]: `tcp.idle_timeout.seconds=${seconds}`,
    });

  it('sets them on the named listener at creation, reads them only for it, and changes them in place', async () => {
    const created = await ensure(idle('80', 600));
    expect(await idleTimeouts(created.state)).toEqual({ 80: '600', 443: '350' });
    expect(nlbWorld.cluster.recorder.count('ModifyListenerAttributes')).toBe(1);

    nlbWorld.cluster.recorder.reset();
    const again = await ensure(idle('80', 600), created.state);
    expect(writes()).toEqual([]);
    // One read, of the listener the annotation names.
    expect(nlbWorld.cluster.recorder.count('DescribeListenerAttributes')).toBe(1);

    nlbWorld.cluster.recorder.reset();
    const changed = await ensure(idle('80', 900), again.state);
    expect(writes()).toEqual(['ElasticLoadBalancingV2.ModifyListenerAttributes']);
    expect(await idleTimeouts(changed.state)).toEqual({ 80: '900', 443: '350' });
    await cleanUp(idle('80', 900), changed.state);
  });

  it('reads no listener attributes for a Service without the annotation', async () => {
    const created = await ensure(service({}));
    nlbWorld.cluster.recorder.reset();
    await ensure(service({}), created.state);
    expect(nlbWorld.cluster.recorder.count('DescribeListenerAttributes')).toBe(0);
    await cleanUp(service({}), created.state);
  });

  it('refuses a listener the Service does not have, creating nothing', async () => {
    const svc = service({
      [`${prefix}listener-attributes.TCP-8080`]: 'tcp.idle_timeout.seconds=600',
    });
    await expect(ensure(svc)).rejects.toThrow(TerminalError);
    await expect(ensure(svc)).rejects.toThrow(
      'listener-attributes.TCP-8080: the Service has no TCP listener on port 8080 (its listeners: TCP-80, TCP-443)',
    );
    expect(writes()).toEqual([]);
  });
});

describe('ALPN policy against moto', () => {
  it('creates the TLS listener with it, and a resync changes nothing', async () => {
    const acm = nlbWorld.cluster.account.client(ACMClient);
    const certificate =
      (await acm.send(new RequestCertificateCommand({ DomainName: 'web.example.com' })))
        .CertificateArn ?? '';
    const svc = service({
      [`${prefix}ssl-cert`]: certificate,
      [`${prefix}ssl-ports`]: 'https',
      [`${prefix}alpn-policy`]: 'HTTP2Preferred',
    });
    const created = await ensure(svc);
    expect((await listeners(created.state)).map((l) => [l.Port, l.Protocol, l.AlpnPolicy])).toEqual(
      [
        [80, 'TCP', []],
        [443, 'TLS', ['HTTP2Preferred']],
      ],
    );
    nlbWorld.cluster.recorder.reset();
    const again = await ensure(svc, created.state);
    expect(writes()).toEqual([]);
    await cleanUp(svc, again.state);
  });
});
