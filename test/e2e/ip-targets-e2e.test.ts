import { ACMClient, RequestCertificateCommand } from '@aws-sdk/client-acm';
import {
  DeregisterTargetsCommand,
  DescribeListenersCommand,
  DescribeTargetGroupAttributesCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readNlbState } from '../../functions/nlb/nlb-state';
import { runSweep } from '../../functions/runtime/sweep';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';

// Issue 36's acceptance, on the real runtime over moto and the fake API server (which enforces
// the project's RBAC with the functions' identity): a Service with pod targets, through the
// messages the forwarder sends (`service`, then `targets` on endpoint changes).

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const ipMode = { 'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type': 'ip' };

let world: RuntimeWorld;

beforeEach(async () => {
  world = await createRuntimeWorld();
});

afterEach(async () => {
  await world.stop();
});

interface Pod {
  readonly ip: string;
  readonly ready?: boolean;
  readonly terminating?: boolean;
}

/** One EndpointSlice of `service`: its pods on 8080 (http) and 8443 (https), as loadBalancerService targets them. */
function slice(service: string, pods: readonly Pod[], name = `${service}-abcde`) {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': service } },
    addressType: 'IPv4',
    ports: [
      { name: 'http', port: 8080, protocol: 'TCP' },
      { name: 'https', port: 8443, protocol: 'TCP' },
    ],
    endpoints: pods.map((pod, i) => ({
      addresses: [pod.ip],
      conditions: {
        ready: pod.ready ?? true,
        serving: pod.ready ?? true,
        terminating: pod.terminating ?? false,
      },
      targetRef: { kind: 'Pod', name: `${service}-${i}`, namespace: 'default' },
      nodeName: 'node-a',
      zone: 'us-east-1a',
    })),
  };
}

function setPods(service: string, pods: readonly Pod[], name = `${service}-abcde`): void {
  const store = world.kube.store;
  const body = slice(service, pods, name);
  try {
    store.get('endpointslices', 'default', name);
  } catch {
    store.create('endpointslices', 'default', body);
    return;
  }
  store.update('endpointslices', 'default', name, body);
}

async function endpointsChanged(service: string): Promise<void> {
  await world.send({ v: 1, kind: 'targets', key: `default/${service}` });
  await world.drain();
}

/** The pod targets (`ip:port`) of each target group, by the group's listener port, from AWS. */
async function podTargets(service = 'web'): Promise<Record<string, string[]>> {
  const record = await world.runtime.store.getService(`default/${service}`);
  const groups = readNlbState(record?.provider).targetGroups ?? {};
  const result: Record<string, string[]> = {};
  for (const [key, group] of Object.entries(groups)) {
    const health = await world.aws.testClients.elbv2.send(
      new DescribeTargetHealthCommand({ TargetGroupArn: group.arn }),
    );
    result[key] = (health.TargetHealthDescriptions ?? [])
      .map((d) => `${d.Target?.Id ?? ''}:${d.Target?.Port ?? ''}`)
      .sort();
  }
  return result;
}

const both = (...ips: string[]) => ({
  '80': ips.map((ip) => `${ip}:8080`).sort(),
  '443': ips.map((ip) => `${ip}:8443`).sort(),
});

describe('ip targets: NLBs that send traffic straight to pods (issue 36)', () => {
  it('creates target groups of type ip holding the ready pods on their target ports, checked on the traffic port', async () => {
    setPods('web', [{ ip: '10.0.1.5' }, { ip: '10.0.1.6' }, { ip: '10.0.1.7', ready: false }]);
    await world.createService('web', ipMode);

    expect(await podTargets()).toEqual(both('10.0.1.5', '10.0.1.6'));
    const record = await world.runtime.store.getService('default/web');
    const groups = Object.values(readNlbState(record?.provider).targetGroups ?? {});
    const described = await world.aws.testClients.elbv2.send(
      new DescribeTargetGroupsCommand({ TargetGroupArns: groups.map((g) => g.arn) }),
    );
    expect(
      described.TargetGroups?.map((g) => [g.TargetType, g.Port, g.HealthCheckPort]).sort(),
    ).toEqual([
      ['ip', 8080, 'traffic-port'],
      ['ip', 8443, 'traffic-port'],
    ]);
    // Nodes play no part: node sync passes the Service by.
    expect(record?.hostsHash).toBeUndefined();
    expect(record?.targetsHash).toBeDefined();
  });

  it('registers a pod that scales up and deregisters one that scales down, with no read of the NLB', async () => {
    setPods('web', [{ ip: '10.0.1.5' }]);
    await world.createService('web', ipMode);
    const describesBefore = world.aws.recorder.count('DescribeLoadBalancers');
    const registersBefore = world.aws.recorder.count('RegisterTargets');

    setPods('web', [{ ip: '10.0.1.5' }, { ip: '10.0.1.6' }, { ip: '10.0.1.8' }]);
    await endpointsChanged('web');
    expect(await podTargets()).toEqual(both('10.0.1.5', '10.0.1.6', '10.0.1.8'));
    // One call per target group for both new pods.
    expect(world.aws.recorder.count('RegisterTargets') - registersBefore).toBe(2);

    const deregistersBefore = world.aws.recorder.count('DeregisterTargets');
    setPods('web', [{ ip: '10.0.1.8' }]);
    await endpointsChanged('web');
    expect(await podTargets()).toEqual(both('10.0.1.8'));
    expect(world.aws.recorder.count('DeregisterTargets') - deregistersBefore).toBe(2);
    expect(world.aws.recorder.count('DescribeLoadBalancers')).toBe(describesBefore);
  });

  it('in a rolling update, deregisters the terminating pods before it registers the new ones', async () => {
    setPods('web', [{ ip: '10.0.1.5' }, { ip: '10.0.1.6' }]);
    await world.createService('web', ipMode);
    const from = world.aws.recorder.calls.length;

    setPods('web', [
      { ip: '10.0.1.5', ready: false, terminating: true },
      { ip: '10.0.1.6' },
      { ip: '10.0.1.9' },
    ]);
    await endpointsChanged('web');
    expect(await podTargets()).toEqual(both('10.0.1.6', '10.0.1.9'));
    const order = world.aws.recorder.calls
      .slice(from)
      .map((call) => call.operation)
      .filter((operation) => operation === 'RegisterTargets' || operation === 'DeregisterTargets');
    expect(order).toEqual([
      'DeregisterTargets',
      'DeregisterTargets',
      'RegisterTargets',
      'RegisterTargets',
    ]);
  });

  it('moves a pod IP reused by another Service to that Service only, whatever order the messages come in', async () => {
    setPods('web', [{ ip: '10.0.1.5' }, { ip: '10.0.1.6' }]);
    await world.createService('web', ipMode);
    setPods('api', [{ ip: '10.0.2.5' }]);
    await world.createService('api', ipMode);

    // web's pod 10.0.1.6 is gone and its IP now belongs to a pod of api. api's message is
    // handled first, and a stale copy of web's comes twice: each reads the slices live.
    setPods('web', [{ ip: '10.0.1.5' }]);
    setPods('api', [{ ip: '10.0.2.5' }, { ip: '10.0.1.6' }]);
    await endpointsChanged('api');
    await endpointsChanged('web');
    await endpointsChanged('web');

    expect(await podTargets('web')).toEqual(both('10.0.1.5'));
    expect(await podTargets('api')).toEqual(both('10.0.1.6', '10.0.2.5'));
  });

  it('switches instance ↔ ip by replacing the target groups, keeping the NLB', async () => {
    setPods('web', [{ ip: '10.0.1.5' }]);
    await world.createService('web');
    const before = readNlbState((await world.runtime.store.getService('default/web'))?.provider);

    const switchTo = async (annotations: Record<string, string | null>) => {
      await world.api.patchNamespacedService(
        { name: 'web', namespace: 'default', body: { metadata: { annotations } } },
        merge,
      );
      await world.send({ v: 1, kind: 'service', key: 'default/web' });
      await world.drain();
      return readNlbState((await world.runtime.store.getService('default/web'))?.provider);
    };
    const listenerTargets = async (lb: string) =>
      (
        (
          await world.aws.testClients.elbv2.send(
            new DescribeListenersCommand({ LoadBalancerArn: lb }),
          )
        ).Listeners ?? []
      )
        .map((l) => l.DefaultActions?.[0]?.TargetGroupArn ?? '')
        .sort();

    const ip = await switchTo(ipMode);
    expect(ip.loadBalancerArn).toBe(before.loadBalancerArn);
    expect(await podTargets()).toEqual(both('10.0.1.5'));
    const ipGroups = Object.values(ip.targetGroups ?? {}).map((g) => g.arn);
    expect(await listenerTargets(ip.loadBalancerArn ?? '')).toEqual([...ipGroups].sort());
    // The instance groups are gone.
    expect(await world.aws.ownedResources()).toHaveLength(4);

    const back = await switchTo({
      'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type': null,
    });
    expect(back.loadBalancerArn).toBe(before.loadBalancerArn);
    expect(Object.values(back.targetGroups ?? {}).every((g) => g.targetType === undefined)).toBe(
      true,
    );
    const instances = world.aws.hosts.map((h) => h.instanceId).sort();
    const targets = await podTargets();
    expect(Object.values(targets).map((ids) => ids.map((id) => id.split(':')[0]).sort())).toEqual([
      instances,
      instances,
    ]);
    expect(await world.aws.ownedResources()).toHaveLength(4);
  });

  it('deletes everything when the Service is deleted, leaking nothing', async () => {
    setPods('web', [{ ip: '10.0.1.5' }, { ip: '10.0.1.6' }]);
    await world.createService('web', ipMode);
    await world.api.deleteNamespacedService({ name: 'web', namespace: 'default' });
    await world.send({ v: 1, kind: 'service', key: 'default/web' });
    await world.drain();
    expect(await world.aws.ownedResources()).toEqual([]);
  });

  it('is not touched by node changes', async () => {
    setPods('web', [{ ip: '10.0.1.5' }]);
    await world.createService('web', ipMode);
    const callsBefore = world.aws.recorder.count('RegisterTargets');
    await world.addNode();
    await world.send({ v: 1, kind: 'node', reason: 'node added' });
    await world.drain();
    expect(world.aws.recorder.count('RegisterTargets')).toBe(callsBefore);
    expect(await podTargets()).toEqual(both('10.0.1.5'));
  });

  it('has a pod deregistered by hand registered again by the sweep’s drift check, and says so', async () => {
    setPods('web', [{ ip: '10.0.1.5' }, { ip: '10.0.1.6' }]);
    await world.createService('web', ipMode);
    const record = await world.runtime.store.getService('default/web');
    const group = readNlbState(record?.provider).targetGroups?.['80'];
    await world.aws.testClients.elbv2.send(
      new DeregisterTargetsCommand({
        TargetGroupArn: group?.arn,
        Targets: [{ Id: '10.0.1.6', Port: 8080 }],
      }),
    );
    expect((await podTargets())['80']).toEqual(['10.0.1.5:8080']);

    expect((await runSweep(world.runtime)).resyncs).toBe(1);
    await world.drain();
    expect(await podTargets()).toEqual(both('10.0.1.5', '10.0.1.6'));
    const events = await world.api.listNamespacedEvent({ namespace: 'default' });
    const repaired = events.items.filter((e) => e.reason === 'RepairedLoadBalancer');
    expect(repaired.map((e) => e.message)).toEqual([
      expect.stringMatching(/register 1 targets for port 80/),
    ]);
  });

  it('keeps target group attributes and TLS listeners working with pod targets', async () => {
    const acm = world.aws.account.client(ACMClient);
    const certificate =
      (await acm.send(new RequestCertificateCommand({ DomainName: 'web.example.com' })))
        .CertificateArn ?? '';
    setPods('web', [{ ip: '10.0.1.5' }]);
    await world.createService('web', {
      ...ipMode,
      'service.beta.kubernetes.io/aws-load-balancer-ssl-cert': certificate,
      'service.beta.kubernetes.io/aws-load-balancer-ssl-ports': 'https',
      'service.beta.kubernetes.io/aws-load-balancer-target-group-attributes':
        'deregistration_delay.timeout_seconds=30',
    });
    const state = readNlbState((await world.runtime.store.getService('default/web'))?.provider);
    const listeners =
      (
        await world.aws.testClients.elbv2.send(
          new DescribeListenersCommand({ LoadBalancerArn: state.loadBalancerArn }),
        )
      ).Listeners ?? [];
    expect(listeners.map((l) => `${l.Protocol}:${l.Port}`).sort()).toEqual(['TCP:80', 'TLS:443']);
    for (const group of Object.values(state.targetGroups ?? {})) {
      const attributes = await world.aws.testClients.elbv2.send(
        new DescribeTargetGroupAttributesCommand({ TargetGroupArn: group.arn }),
      );
      expect(
        attributes.Attributes?.find((a) => a.Key === 'deregistration_delay.timeout_seconds')?.Value,
      ).toBe('30');
    }
    expect(await podTargets()).toEqual(both('10.0.1.5'));
  });

  it('keeps following the pods while a spec it refuses waits to be fixed', async () => {
    setPods('web', [{ ip: '10.0.1.5' }, { ip: '10.0.1.6' }]);
    await world.createService('web', ipMode);
    await world.api.patchNamespacedService(
      { name: 'web', namespace: 'default', body: { spec: { loadBalancerIP: '10.0.0.99' } } },
      merge,
    );
    await world.send({ v: 1, kind: 'service', key: 'default/web' });
    await world.drain();
    const warned = (await world.api.listNamespacedEvent({ namespace: 'default' })).items.filter(
      (e) => e.type === 'Warning',
    );
    expect(warned.map((e) => e.message)).toEqual([
      expect.stringMatching(/spec.loadBalancerIP is not supported/),
    ]);

    // A rollout meanwhile: the pod that is gone must not stay a target.
    setPods('web', [{ ip: '10.0.1.6' }, { ip: '10.0.1.9' }]);
    await endpointsChanged('web');
    expect(await podTargets()).toEqual(both('10.0.1.6', '10.0.1.9'));
  });
});
