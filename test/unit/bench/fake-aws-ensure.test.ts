/**
 * The bench's fake AWS account (bench/sim/fake-aws.ts) under the real NLB provider's full paths:
 * an Ensure from nothing, its drift check, updates, and the delete, on virtual time. The call
 * counts are those the provider makes against moto (bench/results/latest.md, "AWS calls per
 * scenario"), so simulations built on the fake cost what the real provider costs.
 */
import {
  CreateSecurityGroupCommand,
  DeleteSecurityGroupCommand,
  DescribeSubnetsCommand,
} from '@aws-sdk/client-ec2';
import { DeleteTargetGroupCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
// Loaded before any simulation: the provider imports it on first use, and the virtual clock
// takes a wait on anything but its own timers for a blocked simulation.
import '@aws-sdk/client-resource-groups-tagging-api';
import { describe, expect, it } from 'vitest';
import { FakeAwsAccount, FakeAwsClients } from '../../../bench/sim/fake-aws';
import { VirtualClock } from '../../../bench/sim/virtual-clock';
import type { Host } from '../../../functions/core/hosts';
import type { Service } from '../../../functions/core/objects';
import { NlbProvider } from '../../../functions/nlb/nlb-provider';
import { readNlbState } from '../../../functions/nlb/nlb-state';
import type { ProviderState } from '../../../functions/sync/ports';
import { makeService } from '../../../kit/core-objects';
import { createCalls } from '../../support/nlb-call-rows';

const vpcId = 'vpc-0be0c0000000000000';
const limitMs = 600_000;

const hosts: Host[] = [1, 2, 3].map((n) => {
  const instanceId = `i-0b0000000000000${n}`;
  return {
    name: `ip-10-0-0-${n}.ec2.internal`,
    providerID: `aws:///us-east-1a/${instanceId}`,
    instanceId,
  };
});

/** An account with the cluster VPC's subnets, and a provider as propagation-world.ts builds one. */
function world() {
  const clock = new VirtualClock();
  const account = new FakeAwsAccount(clock, 50);
  account.addSubnets(vpcId);
  const clients = new FakeAwsClients(account, clock, () => 0.5);
  const provider = new NlbProvider(
    clients.asNlbClients(),
    {
      clusterName: 'bench',
      vpcId,
      defaultScheme: 'internal',
      defaultSslPolicy: 'ELBSecurityPolicy-TLS13-1-2-2021-06',
      defaultTags: {},
    },
    undefined,
    { now: () => clock.now().getTime() },
  );
  /** Runs `step` on virtual time; the AWS calls it made, by operation. */
  const counted = async <T>(step: () => Promise<T>) => {
    const before = { ...account.stats.byOperation };
    const result = await clock.run(step(), limitMs);
    const calls = Object.fromEntries(
      Object.entries(account.stats.byOperation)
        .map(([op, n]) => [op, n - (before[op] ?? 0)] as const)
        .filter(([, n]) => n > 0),
    );
    return { result, calls };
  };
  const ensure = (service: Service, state: ProviderState | undefined) =>
    counted(() => provider.ensureLoadBalancer(service, hosts, state));
  return { clock, account, provider, counted, ensure };
}

const interval = { 'service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval': '30' };

const createRow = createCalls;

const driftRow = {
  DescribeLoadBalancers: 1,
  DescribeTargetGroups: 1,
  DescribeTags: 1,
  DescribeTargetHealth: 2,
  DescribeListeners: 1,
  DescribeSecurityGroups: 1,
};

describe('the fake AWS account under the real NLB provider', () => {
  it('creates an NLB from nothing with the calls it makes against moto', async () => {
    const { account, ensure } = world();
    const { result, calls } = await ensure(makeService(), undefined);
    expect(calls).toEqual(createRow);
    const state = readNlbState(result.state);
    expect(state.loadBalancerArn).toMatch(/^arn:aws:elasticloadbalancing:.*:loadbalancer\/net\//);
    expect(Object.keys(state.targetGroups ?? {}).sort()).toEqual(['443', '80']);
    expect(result.status.ingress?.[0]?.hostname).toBe(state.dnsName);
    const lb = account.elbv2.loadBalancers.get(state.loadBalancerArn ?? '');
    expect(lb?.scheme).toBe('internal');
    expect(lb?.securityGroups).toEqual([state.securityGroupId]);
    for (const tg of Object.values(state.targetGroups ?? {})) {
      expect([...(account.targetGroups.get(tg.arn)?.targets ?? [])].sort()).toEqual(
        hosts.map((h) => h.instanceId).sort(),
      );
    }
    expect(account.stats.throttled).toBe(0);
  });

  it('a second Ensure is the drift check: reads only', async () => {
    const { ensure } = world();
    const created = await ensure(makeService(), undefined);
    const again = await ensure(makeService(), created.result.state);
    expect(again.calls).toEqual(driftRow);
    expect(again.result.state).toEqual(created.result.state);
  });

  it('a health-check change modifies both target groups and creates nothing', async () => {
    const { ensure, account } = world();
    const created = await ensure(makeService(), undefined);
    const changed = await ensure(makeService({ annotations: interval }), created.result.state);
    expect(changed.calls).toEqual({ ...driftRow, ModifyTargetGroup: 2 });
    for (const tg of account.targetGroups.values()) {
      expect(tg.created?.healthCheck.HealthCheckIntervalSeconds).toBe(30);
    }
    // Now in line: the next Ensure reads only.
    const after = await ensure(makeService({ annotations: interval }), changed.result.state);
    expect(after.calls).toEqual(driftRow);
  });

  it('a port removed, then added back: its listener, group and rule go, then come again', async () => {
    const { ensure, account } = world();
    const created = await ensure(makeService(), undefined);
    const one = makeService({
      ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }],
    });
    const removed = await ensure(one, created.result.state);
    expect(removed.calls).toEqual({
      ...driftRow,
      DeleteListener: 1,
      DeleteTargetGroup: 1,
      RevokeSecurityGroupIngress: 1,
    });
    expect(account.elbv2.listeners.size + account.targetGroups.size).toBe(2);
    expect(Object.keys(readNlbState(removed.result.state).targetGroups ?? {})).toEqual(['80']);

    const added = await ensure(makeService(), removed.result.state);
    expect(added.calls).toEqual({
      ...driftRow,
      DescribeTargetHealth: 1,
      AuthorizeSecurityGroupIngress: 1,
      CreateTargetGroup: 1,
      DescribeTags: 2,
      RegisterTargets: 1,
      CreateListener: 1,
    });
    expect((await ensure(makeService(), added.result.state)).calls).toEqual(driftRow);
  });

  it('drift checks with a TLS listener and attributes read what they manage, as against moto', async () => {
    const { ensure } = world();
    const prefix = 'service.beta.kubernetes.io/aws-load-balancer-';
    const tls = {
      [`${prefix}ssl-cert`]: 'arn:aws:acm:us-east-1:123456789012:certificate/web',
      [`${prefix}ssl-ports`]: 'https',
      [`${prefix}alpn-policy`]: 'HTTP2Preferred',
      [`${prefix}attributes`]:
        'load_balancing.cross_zone.enabled=true,dns_record.client_routing_policy=any_availability_zone',
    };
    const withTls = makeService({ name: 'tls', uid: 'uid-tls', annotations: tls });
    const withAttributes = makeService({
      name: 'attrs',
      uid: 'uid-attrs',
      annotations: {
        ...tls,
        [`${prefix}proxy-protocol`]: '*',
        [`${prefix}listener-attributes.TCP-80`]: 'tcp.idle_timeout.seconds=600',
      },
      spec: { sessionAffinity: 'ClientIP' },
    });
    const tlsCreated = await ensure(withTls, undefined);
    const tlsDrift = await ensure(withTls, tlsCreated.result.state);
    expect(tlsDrift.calls).toEqual({ ...driftRow, DescribeLoadBalancerAttributes: 1 });
    const created = await ensure(withAttributes, undefined);
    expect(created.calls).toMatchObject({
      ModifyLoadBalancerAttributes: 1,
      ModifyTargetGroupAttributes: 2,
      ModifyListenerAttributes: 1,
    });
    const drift = await ensure(withAttributes, created.result.state);
    expect(drift.calls).toEqual({
      ...driftRow,
      DescribeLoadBalancerAttributes: 1,
      DescribeTargetGroupAttributes: 2,
      DescribeListenerAttributes: 1,
    });
  });

  it('creates pod target groups from the endpoint slices, then reads them back unchanged', async () => {
    const { account, counted, provider } = world();
    const service = makeService({
      name: 'pods',
      uid: 'uid-pods',
      annotations: { 'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type': 'ip' },
      ports: [
        { name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 },
        { name: 'https', protocol: 'TCP', port: 443, targetPort: 8443 },
      ],
    });
    const endpointSlices = [
      {
        addressType: 'IPv4',
        ports: [
          { name: 'http', port: 8080, protocol: 'TCP' },
          { name: 'https', port: 8443, protocol: 'TCP' },
        ],
        endpoints: Array.from({ length: 50 }, (_, i) => ({
          addresses: [`10.0.1.${i + 10}`],
          conditions: { ready: true, terminating: false },
          targetRef: { kind: 'Pod' },
        })),
      },
    ];
    const ensure = (state: ProviderState | undefined) =>
      counted(() => provider.ensureLoadBalancer(service, [], state, { endpointSlices }));
    const created = await ensure(undefined);
    expect(created.calls).toEqual(createRow);
    const groups = [...account.targetGroups.values()];
    expect(groups.map((tg) => [tg.targetType, tg.port, tg.targets.size])).toEqual([
      ['ip', 8080, 50],
      ['ip', 8443, 50],
    ]);
    expect(groups[0]?.targets.has('10.0.1.10:8080')).toBe(true);
    expect((await ensure(created.result.state)).calls).toEqual(driftRow);
  });

  it('deletes everything of the Service with the calls it makes against moto', async () => {
    const { account, counted, ensure, provider } = world();
    const service = makeService();
    const created = await ensure(service, undefined);
    // As syncService's delete branch: whether anything is left, then the delete.
    const { result, calls } = await counted(async () => {
      const found = await provider.getLoadBalancer(service, created.result.state);
      expect(found.exists).toBe(true);
      return provider.ensureLoadBalancerDeleted(service, created.result.state);
    });
    expect(calls).toEqual({
      GetResources: 2,
      DeleteLoadBalancer: 1,
      DeleteTargetGroup: 2,
      DeleteSecurityGroup: 1,
    });
    expect(result.requeueAfterSeconds).toBeUndefined();
    expect(result.loadBalancerId).toBe(readNlbState(created.result.state).loadBalancerArn);
    expect(account.elbv2.loadBalancers.size).toBe(0);
    expect(account.targetGroups.size).toBe(0);
    expect(account.elbv2.listeners.size).toBe(0);
    expect(account.ec2.securityGroups.size).toBe(0);
    const again = await counted(() => provider.getLoadBalancer(service, result.state));
    expect(again.result.exists).toBe(false);
  });

  it('refuses what AWS refuses: a group in use, a security group an NLB holds', async () => {
    const { account, clock, ensure } = world();
    const created = await ensure(makeService(), undefined);
    const state = readNlbState(created.result.state);
    const tgArn = state.targetGroups?.['80']?.arn ?? '';
    await expect(
      clock.run(
        account.attempt('elbv2', new DeleteTargetGroupCommand({ TargetGroupArn: tgArn })),
        limitMs,
      ),
    ).rejects.toMatchObject({ name: 'ResourceInUse', $fault: 'client' });
    await expect(
      clock.run(
        account.attempt('ec2', new DeleteSecurityGroupCommand({ GroupId: state.securityGroupId })),
        limitMs,
      ),
    ).rejects.toMatchObject({ name: 'DependencyViolation', $fault: 'client' });
  });
});

describe("EC2's mutating bucket", () => {
  it('takes EC2 mutating calls from their own bucket: the 51st in one instant is throttled', async () => {
    const { account, clock } = world();
    const create = (n: number) =>
      account
        .attempt(
          'ec2',
          new CreateSecurityGroupCommand({ GroupName: `g-${n}`, Description: 'x', VpcId: vpcId }),
        )
        .then(
          () => 'created',
          (error: Error) => error.name,
        );
    const outcomes = await clock.run(
      Promise.all(Array.from({ length: 51 }, (_, n) => create(n))),
      limitMs,
    );
    expect(outcomes.filter((o) => o === 'created')).toHaveLength(50);
    expect(outcomes[50]).toBe('RequestLimitExceeded');
    expect(account.stats.throttledByOperation).toEqual({ CreateSecurityGroup: 1 });
    // Describe* has a bucket of its own, untouched.
    await clock.run(account.attempt('ec2', new DescribeSubnetsCommand({})), limitMs);
    expect(account.stats.throttled).toBe(1);
  });
});
