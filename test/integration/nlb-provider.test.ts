import { DescribeSecurityGroupsCommand } from '@aws-sdk/client-ec2';
import {
  CreateLoadBalancerCommand,
  CreateTargetGroupCommand,
  DescribeListenerCertificatesCommand,
  DescribeListenersCommand,
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetGroupAttributesCommand,
  DescribeTargetHealthCommand,
  ElasticLoadBalancingV2Client,
  RegisterTargetsCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { ACMClient, RequestCertificateCommand } from '@aws-sdk/client-acm';
import { describe, expect, it } from 'vitest';
import { ownershipTags } from '../../functions/nlb/model/naming';
import { readNlbState } from '../../functions/nlb/nlb-state';
import {
  failureClassOf,
  RequeueAfterError,
  RetryableError,
  TerminalError,
} from '../../functions/core/errors';
import { throttledRequeueSeconds } from '../../functions/aws/aws-errors';
import { stableHash } from '../../functions/core/hash';
import type { Service } from '../../functions/core/objects';
import { providerStateOf, type ProviderState } from '../../functions/sync/ports';
import { makeService, type ServiceOptions } from '../../kit/core-objects';
import { everythingOfWeb, useNlbProviderWorld } from '../support/nlb-provider-world';

const nlbWorld = useNlbProviderWorld();

const service = (options: ServiceOptions = {}): Service =>
  makeService({ uid: 'uid-web', ...options });

async function ensure(svc: Service, state?: ProviderState) {
  return nlbWorld.provider.ensureLoadBalancer(svc, nlbWorld.cluster.hosts, state);
}

async function describeAll(state: ProviderState) {
  const nlb = readNlbState(state);
  const elbv2 = nlbWorld.cluster.account.client(
    (await import('@aws-sdk/client-elastic-load-balancing-v2')).ElasticLoadBalancingV2Client,
  );
  const lbs = await elbv2.send(
    new DescribeLoadBalancersCommand({ LoadBalancerArns: [nlb.loadBalancerArn ?? ''] }),
  );
  const listeners = await elbv2.send(
    new DescribeListenersCommand({ LoadBalancerArn: nlb.loadBalancerArn }),
  );
  // By the ARNs in state: moto does not list a group under its NLB after ModifyListener points at it.
  const groups = await elbv2.send(
    new DescribeTargetGroupsCommand({
      TargetGroupArns: Object.values(nlb.targetGroups ?? {}).map((tg) => tg.arn),
    }),
  );
  const targets: Record<string, string[]> = {};
  for (const tg of groups.TargetGroups ?? []) {
    const health = await elbv2.send(
      new DescribeTargetHealthCommand({ TargetGroupArn: tg.TargetGroupArn }),
    );
    targets[String(tg.Port)] = (health.TargetHealthDescriptions ?? [])
      .map((d) => d.Target?.Id ?? '')
      .sort();
  }
  const ec2 = nlbWorld.cluster.account.client((await import('@aws-sdk/client-ec2')).EC2Client);
  const sg = await ec2.send(
    new DescribeSecurityGroupsCommand({ GroupIds: [nlb.securityGroupId ?? ''] }),
  );
  return {
    lb: lbs.LoadBalancers?.[0],
    listeners: (listeners.Listeners ?? []).sort((a, b) => (a.Port ?? 0) - (b.Port ?? 0)),
    groups: (groups.TargetGroups ?? []).sort((a, b) => (a.Port ?? 0) - (b.Port ?? 0)),
    targets,
    securityGroup: sg.SecurityGroups?.[0],
  };
}

describe('NlbProvider against moto', () => {
  it('creates an NLB with a security group, one target group and listener per port, and all hosts as targets', async () => {
    const result = await ensure(service());
    const world = await describeAll(result.state);

    expect(world.lb).toMatchObject({ Type: 'network', Scheme: 'internal' });
    expect(world.lb?.SecurityGroups).toEqual(
      expect.arrayContaining([nlbWorld.cluster.settings.backendSecurityGroupId]),
    );
    expect(world.lb?.LoadBalancerName?.length).toBeLessThanOrEqual(32);
    expect(world.listeners.map((l) => `${l.Protocol}:${l.Port}`)).toEqual(['TCP:80', 'TCP:443']);
    // Listeners carry the ownership tags, which the IAM policy's listener statements require.
    const elbv2 = nlbWorld.cluster.account.client(ElasticLoadBalancingV2Client);
    const listenerTags = await elbv2.send(
      new DescribeTagsCommand({ ResourceArns: world.listeners.map((l) => l.ListenerArn ?? '') }),
    );
    expect(
      listenerTags.TagDescriptions?.map((d): Record<string, string> =>
        Object.fromEntries((d.Tags ?? []).map((t) => [t.Key ?? '', t.Value ?? ''])),
      ),
    ).toEqual([
      expect.objectContaining({
        [ownershipTags.cluster]: nlbWorld.cluster.settings.clusterName,
        [ownershipTags.resource]: 'listener:80',
      }),
      expect.objectContaining({ [ownershipTags.resource]: 'listener:443' }),
    ]);
    expect(world.groups.map((g) => `${g.Protocol}:${g.Port}:${g.HealthCheckProtocol}`)).toEqual([
      'TCP:30080:TCP',
      'TCP:30443:TCP',
    ]);
    const instanceIds = nlbWorld.cluster.hosts.map((h) => h.instanceId).sort();
    expect(world.targets).toEqual({ '30080': instanceIds, '30443': instanceIds });
    expect(result.status.ingress?.[0]?.hostname).toBe(world.lb?.DNSName?.toLowerCase());
    const ingress = world.securityGroup?.IpPermissions?.map(
      (p) => `${p.IpProtocol}:${p.FromPort}:${p.IpRanges?.map((r) => r.CidrIp).join()}`,
    );
    expect(ingress?.sort()).toEqual(['icmp:3:0.0.0.0/0', 'tcp:443:0.0.0.0/0', 'tcp:80:0.0.0.0/0']);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('makes no write on an unchanged NLB and reads at most 8 times', async () => {
    const first = await ensure(service());
    nlbWorld.cluster.recorder.reset();
    await ensure(service(), first.state);
    const calls = Object.keys(nlbWorld.cluster.recorder.byOperation());
    expect(calls.every((c) => /\.(Describe|Get)/.test(c))).toBe(true);
    expect(nlbWorld.cluster.recorder.count()).toBeLessThanOrEqual(8);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('registers only the new node, one call per target group, after one ownership read', async () => {
    const first = await ensure(service());
    const [added] = await nlbWorld.cluster.addHosts(1);
    nlbWorld.cluster.recorder.reset();
    const updated = await nlbWorld.provider.updateLoadBalancer(
      service(),
      [...nlbWorld.cluster.hosts, added!],
      first.state,
    );
    // One DescribeTags for both groups: state alone does not prove they are still ours.
    expect(nlbWorld.cluster.recorder.byOperation()).toEqual({
      'ElasticLoadBalancingV2.DescribeTags': 1,
      'ElasticLoadBalancingV2.RegisterTargets': 2,
    });
    const world = await describeAll(updated.state);
    expect(world.targets['30080']).toContain(added!.instanceId);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('deregisters removed nodes', async () => {
    const first = await ensure(service());
    const updated = await nlbWorld.provider.updateLoadBalancer(
      service(),
      nlbWorld.cluster.hosts.slice(0, 1),
      first.state,
    );
    const world = await describeAll(updated.state);
    expect(world.targets['30080']).toEqual([nlbWorld.cluster.hosts[0]!.instanceId]);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('replaces a target group make-before-break when a nodePort changes, and adds and removes ports', async () => {
    const first = await ensure(service());
    const changed = service({
      ports: [
        { name: 'http', protocol: 'TCP', port: 80, nodePort: 31080 },
        { name: 'dns', protocol: 'UDP', port: 53, nodePort: 30053 },
      ],
    });
    const result = await ensure(changed, first.state);
    const world = await describeAll(result.state);
    expect(world.listeners.map((l) => `${l.Protocol}:${l.Port}`)).toEqual(['UDP:53', 'TCP:80']);
    expect(world.groups.map((g) => `${g.Protocol}:${g.Port}`)).toEqual(['UDP:30053', 'TCP:31080']);
    const http = world.listeners.find((l) => l.Port === 80);
    expect(http?.DefaultActions?.[0]?.TargetGroupArn).toBe(
      world.groups.find((g) => g.Port === 31080)?.TargetGroupArn,
    );
    // UDP-only ports are health-checked on kube-proxy, the only thing answering for them.
    expect(world.groups.find((g) => g.Port === 30053)).toMatchObject({
      HealthCheckProtocol: 'HTTP',
      HealthCheckPort: '10256',
    });
    nlbWorld.expectedLeft = [
      'load-balancer (default/web)',
      'security-group (default/web)',
      'target-group:53 (default/web)',
      'target-group:80 (default/web)',
    ];
  });

  it('changes health checks, source ranges, tags and attributes in place', async () => {
    const first = await ensure(service());
    const changed = service({
      annotations: {
        'service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol': 'HTTP',
        'service.beta.kubernetes.io/aws-load-balancer-healthcheck-path': '/ready',
        'service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval': '20',
        'service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags': 'team=payments',
        'service.beta.kubernetes.io/aws-load-balancer-target-group-attributes':
          'deregistration_delay.timeout_seconds=60',
      },
      spec: { loadBalancerSourceRanges: ['10.0.0.0/8'] },
    });
    const second = await ensure(changed, first.state);
    const world = await describeAll(second.state);
    expect(world.groups[0]).toMatchObject({
      HealthCheckProtocol: 'HTTP',
      HealthCheckPath: '/ready',
      HealthCheckIntervalSeconds: 20,
    });
    const ingress = world.securityGroup?.IpPermissions?.flatMap(
      (p) => p.IpRanges?.map((r) => `${p.IpProtocol}:${p.FromPort}:${r.CidrIp}`) ?? [],
    );
    expect(ingress?.sort()).toEqual([
      'icmp:3:10.0.0.0/8',
      'tcp:443:10.0.0.0/8',
      'tcp:80:10.0.0.0/8',
    ]);
    const elbv2 = nlbWorld.cluster.testClients.elbv2;
    const tags = await elbv2.send(
      new DescribeTagsCommand({ ResourceArns: [world.lb?.LoadBalancerArn ?? ''] }),
    );
    expect(tags.TagDescriptions?.[0]?.Tags).toEqual(
      expect.arrayContaining([{ Key: 'team', Value: 'payments' }]),
    );
    const attributes = await elbv2.send(
      new DescribeTargetGroupAttributesCommand({ TargetGroupArn: world.groups[0]?.TargetGroupArn }),
    );
    expect(attributes.Attributes).toEqual(
      expect.arrayContaining([{ Key: 'deregistration_delay.timeout_seconds', Value: '60' }]),
    );
    // Same listeners and target groups: nothing was replaced.
    expect(readNlbState(second.state).targetGroups).toEqual(readNlbState(first.state).targetGroups);

    // Dropping the extra tag removes it again.
    const third = await ensure(
      service({ spec: { loadBalancerSourceRanges: ['10.0.0.0/8'] } }),
      second.state,
    );
    const after = await elbv2.send(
      new DescribeTagsCommand({ ResourceArns: [readNlbState(third.state).loadBalancerArn ?? ''] }),
    );
    expect(after.TagDescriptions?.[0]?.Tags?.some((t) => t.Key === 'team')).toBe(false);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('creates TLS listeners with the certificate and policy on the chosen ports', async () => {
    const acm = nlbWorld.cluster.account.client(ACMClient);
    const cert =
      (await acm.send(new RequestCertificateCommand({ DomainName: 'web.example.com' })))
        .CertificateArn ?? '';
    const result = await ensure(
      service({
        annotations: {
          'service.beta.kubernetes.io/aws-load-balancer-ssl-cert': cert,
          'service.beta.kubernetes.io/aws-load-balancer-ssl-ports': 'https',
        },
      }),
    );
    const world = await describeAll(result.state);
    expect(world.listeners.map((l) => `${l.Protocol}:${l.Port}`)).toEqual(['TCP:80', 'TLS:443']);
    const tls = world.listeners.find((l) => l.Port === 443);
    expect(tls?.Certificates?.[0]?.CertificateArn).toBe(cert);
    expect(tls?.SslPolicy).toBe('ELBSecurityPolicy-TLS13-1-2-2021-06');
    expect(world.groups.map((g) => g.Protocol)).toEqual(['TCP', 'TCP']);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('keeps several TLS certificates in step: a resync makes no change, a certificate taken out is removed', async () => {
    const acm = nlbWorld.cluster.account.client(ACMClient);
    const request = async (domain: string) =>
      (await acm.send(new RequestCertificateCommand({ DomainName: domain }))).CertificateArn ?? '';
    const [first, second] = [await request('a.example.com'), await request('b.example.com')];
    const tls = (certs: string[]) =>
      service({
        annotations: {
          'service.beta.kubernetes.io/aws-load-balancer-ssl-cert': certs.join(','),
          'service.beta.kubernetes.io/aws-load-balancer-ssl-ports': 'https',
        },
      });
    const created = await ensure(tls([first, second]));
    const listenerArn = async (state: ProviderState) =>
      (await describeAll(state)).listeners.find((l) => l.Port === 443)?.ListenerArn ?? '';
    const certificates = async (state: ProviderState) =>
      (
        await nlbWorld.cluster.testClients.elbv2.send(
          new DescribeListenerCertificatesCommand({ ListenerArn: await listenerArn(state) }),
        )
      ).Certificates?.map(
        (c) =>
          `${c.CertificateArn === first ? 'first' : 'second'}${c.IsDefault ? ' (default)' : ''}`,
      );
    expect(await certificates(created.state)).toEqual(['first (default)', 'second']);

    nlbWorld.cluster.recorder.reset();
    const again = await ensure(tls([first, second]), created.state);
    const mutations = Object.keys(nlbWorld.cluster.recorder.byOperation()).filter(
      (op) => !/\.(Describe|Get)/.test(op),
    );
    expect(mutations).toEqual([]);
    expect(nlbWorld.cluster.recorder.count('DescribeListenerCertificates')).toBe(1);

    nlbWorld.cluster.recorder.reset();
    const fewer = await ensure(tls([first]), again.state);
    expect(
      Object.keys(nlbWorld.cluster.recorder.byOperation()).filter(
        (op) => !/\.(Describe|Get)/.test(op),
      ),
    ).toEqual(['ElasticLoadBalancingV2.RemoveListenerCertificates']);
    expect(await certificates(fewer.state)).toEqual(['first (default)']);

    // Down to one certificate: DescribeListeners' default certificate is enough from now on.
    nlbWorld.cluster.recorder.reset();
    await ensure(tls([first]), fewer.state);
    expect(nlbWorld.cluster.recorder.count('DescribeListenerCertificates')).toBe(0);
    expect(
      Object.keys(nlbWorld.cluster.recorder.byOperation()).filter(
        (op) => !/\.(Describe|Get)/.test(op),
      ),
    ).toEqual([]);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('reports a certificate AWS does not know as a retryable dependency error naming it (one being issued appears later)', async () => {
    const missing = `arn:aws:acm:us-east-1:${nlbWorld.cluster.account.accountId}:certificate/does-not-exist`;
    const svc = service({
      annotations: { 'service.beta.kubernetes.io/aws-load-balancer-ssl-cert': missing },
    });
    const failure = await ensure(svc).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(RetryableError);
    expect(failureClassOf(failure)).toBe('dependency');
    expect(String(failure)).toMatch(/CertificateNotFound/);
    // What was created before the refusal is recorded, so deleting the Service leaves nothing.
    await nlbWorld.provider.ensureLoadBalancerDeleted(svc, providerStateOf(failure));
    nlbWorld.expectedLeft = [];
  });

  it('replaces the NLB when the scheme changes', async () => {
    const first = await ensure(service());
    const second = await ensure(
      service({
        annotations: { 'service.beta.kubernetes.io/aws-load-balancer-scheme': 'internet-facing' },
      }),
      first.state,
    );
    const world = await describeAll(second.state);
    expect(world.lb?.Scheme).toBe('internet-facing');
    expect(readNlbState(second.state).loadBalancerArn).not.toBe(
      readNlbState(first.state).loadBalancerArn,
    );
    expect(world.listeners).toHaveLength(2);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('deletes everythingOfWeb, and deleting again is a no-op', async () => {
    const created = await ensure(service());
    const deleted = await nlbWorld.provider.ensureLoadBalancerDeleted(service(), created.state);
    expect(deleted.requeueAfterSeconds).toBeUndefined();
    expect(await nlbWorld.provider.getLoadBalancer(service(), deleted.state)).toMatchObject({
      exists: false,
    });

    const again = await nlbWorld.provider.ensureLoadBalancerDeleted(service(), deleted.state);
    expect(again.requeueAfterSeconds).toBeUndefined();
    nlbWorld.expectedLeft = [];
  });

  it('keeps a security group AWS still holds after the NLB is gone, and deletes it on a later pass', async () => {
    const created = await ensure(service());
    nlbWorld.cluster.recorder.injectFault({
      operation: 'DeleteSecurityGroup',
      kind: 'error',
      code: 'DependencyViolation',
      times: 1,
    });
    const first = await nlbWorld.provider.ensureLoadBalancerDeleted(service(), created.state);
    expect(first.requeueAfterSeconds).toBe(30);
    expect(readNlbState(first.state).securityGroupId).toBe(
      readNlbState(created.state).securityGroupId,
    );
    expect(await nlbWorld.cluster.ownedResources()).toEqual(['security-group (default/web)']);

    const second = await nlbWorld.provider.ensureLoadBalancerDeleted(service(), first.state);
    expect(second.requeueAfterSeconds).toBeUndefined();
    nlbWorld.expectedLeft = [];
  });

  it('keeps a target group AWS reports in use, and deletes it on a later pass', async () => {
    const created = await ensure(service());
    nlbWorld.cluster.recorder.injectFault({
      operation: 'DeleteTargetGroup',
      kind: 'error',
      code: 'ResourceInUse',
      times: 1,
    });
    const first = await nlbWorld.provider.ensureLoadBalancerDeleted(service(), created.state);
    expect(first.requeueAfterSeconds).toBe(30);
    const second = await nlbWorld.provider.ensureLoadBalancerDeleted(service(), first.state);
    expect(second.requeueAfterSeconds).toBeUndefined();
    nlbWorld.expectedLeft = [];
  });

  it('reports throttling as a requeue, not a failure, with what it had created, and the next pass finishes without duplicates', async () => {
    nlbWorld.cluster.recorder.injectFault({
      operation: 'CreateListener',
      kind: 'throttle',
      times: 1,
    });
    const failure = await ensure(service()).then(
      () => undefined,
      (error: unknown) => error,
    );
    // Not retried in place (issue 37): the pass ends and comes back through the queue.
    expect(failure).toBeInstanceOf(RequeueAfterError);
    expect((failure as RequeueAfterError).seconds).toBe(throttledRequeueSeconds);
    // Both listeners are created side by side (one batch): one was throttled, neither retried.
    expect(
      nlbWorld.cluster.recorder.attempts.filter((a) => a.operation === 'CreateListener'),
    ).toHaveLength(2);
    const partial = providerStateOf(failure);
    expect(readNlbState(partial).loadBalancerArn).toMatch(/^arn:aws:elasticloadbalancing:/);

    const retried = await ensure(service(), partial);
    expect(readNlbState(retried.state).loadBalancerArn).toBe(readNlbState(partial).loadBalancerArn);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('deletes by ownership tags when state was lost', async () => {
    await ensure(service());
    expect(await nlbWorld.provider.getLoadBalancer(service(), undefined)).toMatchObject({
      exists: true,
    });
    await nlbWorld.provider.ensureLoadBalancerDeleted(service(), undefined);
    nlbWorld.expectedLeft = [];
  });

  it('refuses to touch a load balancer with our name that someone else owns', async () => {
    const name = nlbWorld.provider.getLoadBalancerName(service());
    const foreign = await nlbWorld.cluster.testClients.elbv2.send(
      new CreateLoadBalancerCommand({
        Name: name,
        Type: 'network',
        Subnets: [...nlbWorld.cluster.subnetIds],
        Tags: [{ Key: 'owner', Value: 'someone-else' }],
      }),
    );
    await expect(ensure(service())).rejects.toThrow(TerminalError);
    await expect(ensure(service())).rejects.toThrow(/not owned by this Service/);
    const still = await nlbWorld.cluster.testClients.elbv2.send(
      new DescribeLoadBalancersCommand({
        LoadBalancerArns: [foreign.LoadBalancers?.[0]?.LoadBalancerArn ?? ''],
      }),
    );
    expect(still.LoadBalancers).toHaveLength(1);
    // The security group created before the refusal is ours and deletable; the foreign NLB is untouched.
    await nlbWorld.provider.ensureLoadBalancerDeleted(service(), undefined);
    expect(
      (
        await nlbWorld.cluster.testClients.elbv2.send(
          new DescribeLoadBalancersCommand({ Names: [name] }),
        )
      ).LoadBalancers,
    ).toHaveLength(1);
    nlbWorld.expectedLeft = [];
  });

  describe('a target group of our name left by an attempt whose answer was lost', () => {
    const interval = { 'service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval': '10' };

    /** The first target group's name and tags as the provider makes them; then nothing is left. */
    async function leftBehind(tags: (ours: { Key: string; Value: string }[]) => unknown[]) {
      const first = readNlbState((await ensure(service())).state);
      const tg = first.targetGroups?.['80'];
      const described = await nlbWorld.cluster.testClients.elbv2.send(
        new DescribeTagsCommand({ ResourceArns: [tg?.arn ?? ''] }),
      );
      const ours = (described.TagDescriptions?.[0]?.Tags ?? []).map((t) => ({
        Key: t.Key ?? '',
        Value: t.Value ?? '',
      }));
      await nlbWorld.provider.ensureLoadBalancerDeleted(service(), first as ProviderState);
      // The lost attempt used the health check before the Service changed it (AWS then answers
      // DuplicateTargetGroupName instead of handing the group back).
      const created = await nlbWorld.cluster.testClients.elbv2.send(
        new CreateTargetGroupCommand({
          Name: tg?.name,
          Protocol: 'TCP',
          Port: 30080,
          VpcId: nlbWorld.cluster.vpcId,
          TargetType: 'instance',
          HealthCheckIntervalSeconds: 30,
          Tags: tags(ours) as { Key: string; Value: string }[],
        }),
      );
      return created.TargetGroups?.[0]?.TargetGroupArn ?? '';
    }

    it('adopts ours and brings it to the desired health check: no duplicate', async () => {
      const arn = await leftBehind((ours) => ours);
      const state = readNlbState((await ensure(service({ annotations: interval }))).state);
      expect(state.targetGroups?.['80']?.arn).toBe(arn);
      const { groups } = await describeAll(state as ProviderState);
      expect(groups.map((g) => g.HealthCheckIntervalSeconds)).toEqual([10, 10]);
      nlbWorld.expectedLeft = everythingOfWeb;
    });

    it('refuses one that is not ours, touching nothing of it', async () => {
      const arn = await leftBehind(() => [{ Key: 'owner', Value: 'someone-else' }]);
      await expect(ensure(service({ annotations: interval }))).rejects.toThrow(
        /not owned by this Service/,
      );
      const still = await nlbWorld.cluster.testClients.elbv2.send(
        new DescribeTargetGroupsCommand({ TargetGroupArns: [arn] }),
      );
      expect(still.TargetGroups?.[0]?.HealthCheckIntervalSeconds).toBe(30);
      await nlbWorld.provider.ensureLoadBalancerDeleted(service(), undefined);
      nlbWorld.expectedLeft = [];
    });
  });

  it("past the client-side limit's burst, a registration waits at most 250 ms for its slot; one further off ends requeue-after instead (issue 37)", async () => {
    const first = await ensure(service());
    const arn = Object.values(readNlbState(first.state).targetGroups ?? {})[0]!.arn;
    const started = performance.now();
    const results = await Promise.allSettled(
      Array.from({ length: 30 }, () =>
        nlbWorld.cluster.clients.elbv2.send(
          new RegisterTargetsCommand({
            TargetGroupArn: arn,
            Targets: [{ Id: nlbWorld.cluster.hosts[0]!.instanceId }],
          }),
        ),
      ),
    );
    const refused = results.filter((r) => r.status === 'rejected');
    // The burst of 20 (less what the sync's own 2 left of it, refilled at 4/s since) at once,
    // and one more within 250 ms: never all 30, never a wait past the bound.
    expect(results.length - refused.length).toBeGreaterThanOrEqual(19);
    expect(results.length - refused.length).toBeLessThanOrEqual(23);
    for (const r of refused) expect(r.reason).toBeInstanceOf(RequeueAfterError);
    expect(performance.now() - started).toBeLessThan(1_000);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('reports invalid annotations as a terminal error naming them, creating nothing', async () => {
    const bad = service({
      annotations: { 'service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval': '2' },
    });
    await expect(ensure(bad)).rejects.toThrow(
      /aws-load-balancer-healthcheck-interval: invalid value "2"/,
    );
    expect(nlbWorld.cluster.recorder.count()).toBe(0);
  });
});

/**
 * State in DynamoDB is not proof of ownership: whoever can write the table could point one
 * Service's item at another Service's (or another cluster's) resources. Every delete and every
 * target registration reads the tags first.
 */
describe('NlbProvider with ARNs in state that another owner holds', () => {
  const other = () => makeService({ namespace: 'team-b', name: 'api', uid: 'uid-other' });
  const othersLeft = [
    'load-balancer (team-b/api)',
    'security-group (team-b/api)',
    'target-group:443 (team-b/api)',
    'target-group:80 (team-b/api)',
  ];

  async function targetsOf(arn: string): Promise<string[]> {
    const health = await nlbWorld.cluster.testClients.elbv2.send(
      new DescribeTargetHealthCommand({ TargetGroupArn: arn }),
    );
    return (health.TargetHealthDescriptions ?? []).map((d) => d.Target?.Id ?? '').sort();
  }

  /** A target group of another cluster, with one target. */
  async function otherClusterGroup(): Promise<string> {
    const created = await nlbWorld.cluster.testClients.elbv2.send(
      new CreateTargetGroupCommand({
        Name: 'k8s-other-cluster-group',
        Protocol: 'TCP',
        Port: 31000,
        VpcId: nlbWorld.cluster.vpcId,
        TargetType: 'instance',
        Tags: [
          { Key: ownershipTags.cluster, Value: 'another-cluster' },
          { Key: ownershipTags.serviceUid, Value: 'uid-web' },
        ],
      }),
    );
    const arn = created.TargetGroups?.[0]?.TargetGroupArn ?? '';
    await nlbWorld.cluster.testClients.elbv2.send(
      new RegisterTargetsCommand({
        TargetGroupArn: arn,
        Targets: [{ Id: nlbWorld.cluster.hosts[0]!.instanceId }],
      }),
    );
    return arn;
  }

  it('a host update writes nothing to a target group of another Service or cluster, and says whose it is', async () => {
    const mine = readNlbState((await ensure(service())).state);
    const theirs = readNlbState((await ensure(other())).state);
    const foreignTg = theirs.targetGroups?.['80']?.arn ?? '';
    const otherCluster = await otherClusterGroup();
    const all = nlbWorld.cluster.hosts.map((h) => h.instanceId).sort();
    for (const [arn, recorded] of [
      [foreignTg, all],
      [otherCluster, [nlbWorld.cluster.hosts[0]!.instanceId]],
    ] as const) {
      const tampered = structuredClone(mine);
      tampered.targetGroups = {
        ...tampered.targetGroups,
        '80': { arn, name: 'tampered', targets: [...recorded] },
      };
      nlbWorld.cluster.recorder.reset();
      // The update wants one host only: it would deregister the others from the foreign group.
      await expect(
        nlbWorld.provider.updateLoadBalancer(
          service(),
          nlbWorld.cluster.hosts.slice(1, 2),
          tampered as ProviderState,
        ),
      ).rejects.toThrow(new RegExp(`${arn.replace(/[/.]/g, '\\$&')}.*not owned by this Service`));
      expect(nlbWorld.cluster.recorder.count('RegisterTargets')).toBe(0);
      expect(nlbWorld.cluster.recorder.count('DeregisterTargets')).toBe(0);
    }
    expect(await targetsOf(foreignTg)).toEqual(all);
    expect(await targetsOf(otherCluster)).toEqual([nlbWorld.cluster.hosts[0]!.instanceId]);
    nlbWorld.expectedLeft = [...everythingOfWeb, ...othersLeft];
  });

  it('a delete removes only what is ours and leaves the other Service and cluster untouched', async () => {
    const mine = readNlbState((await ensure(service())).state);
    const theirs = readNlbState((await ensure(other())).state);
    const otherCluster = await otherClusterGroup();
    const tampered = {
      ...mine,
      loadBalancerArn: theirs.loadBalancerArn,
      securityGroupId: theirs.securityGroupId,
      targetGroups: {
        ...mine.targetGroups,
        x: { arn: theirs.targetGroups?.['443']?.arn ?? '', name: 'x' },
        y: { arn: otherCluster, name: 'y' },
      },
    };
    const result = await nlbWorld.provider.ensureLoadBalancerDeleted(
      service(),
      tampered as unknown as ProviderState,
    );
    expect(result.requeueAfterSeconds).toBeUndefined();
    expect(JSON.stringify(result.state)).not.toMatch(/team-b|other-cluster/);
    // Ours is gone (found by its tags), theirs is whole.
    expect(await nlbWorld.cluster.ownedResources()).toEqual(othersLeft);
    expect(await targetsOf(otherCluster)).toEqual([nlbWorld.cluster.hosts[0]!.instanceId]);
    const lbs = await nlbWorld.cluster.testClients.elbv2.send(
      new DescribeLoadBalancersCommand({ LoadBalancerArns: [theirs.loadBalancerArn ?? ''] }),
    );
    expect(lbs.LoadBalancers).toHaveLength(1);
    // With only foreign ARNs left in state, nothing of ours exists.
    const onlyForeign = {
      ...tampered,
      targetGroups: { x: tampered.targetGroups.x, y: tampered.targetGroups.y },
    };
    expect(
      await nlbWorld.provider.getLoadBalancer(service(), onlyForeign as unknown as ProviderState),
    ).toEqual({
      exists: false,
    });
    nlbWorld.expectedLeft = othersLeft;
  });
});

/**
 * Names moved from a 40-bit cyrb53 hash to SHA-256. A controller upgrade must not rename, and so
 * replace or orphan, what existing Services have: their state (written before naming had a
 * version) keeps them on the old names; new Services get the new ones.
 */
describe('upgrading from 40-bit names', () => {
  const legacyHash = (parts: readonly (string | number)[]) =>
    stableHash(parts.map(String)).slice(0, 10);
  const withPort = service({
    ports: [
      { name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 },
      { name: 'https', protocol: 'TCP', port: 443, nodePort: 30443 },
      { name: 'alt', protocol: 'TCP', port: 8080, nodePort: 30808 },
    ],
  });

  it('keeps the NLB, target groups and security group of an existing Service, and names what it adds the old way', async () => {
    // What the controller left before the switch: old names, and a state without a naming version.
    const made = readNlbState((await ensure(service(), { namingVersion: 1 })).state);
    const { namingVersion: _, ...before } = made;
    const c = nlbWorld.cluster.settings.clusterName;
    expect(before.loadBalancerName).toBe(
      `k8s-default-web-${legacyHash([c, 'default', 'web', 'uid-web', 'internal'])}`,
    );
    expect(before.targetGroups?.['80']?.name).toBe(
      `k8s-default-web-${legacyHash([c, 'default', 'web', 'uid-web', '80', 'TCP', 30080])}`,
    );

    nlbWorld.cluster.recorder.reset();
    const after = readNlbState((await ensure(service(), before as ProviderState)).state);
    const writes = Object.keys(nlbWorld.cluster.recorder.byOperation()).filter(
      (op) => !/\.(Describe|Get)/.test(op),
    );
    expect(writes).toEqual([]);
    expect(after).toMatchObject({
      loadBalancerArn: before.loadBalancerArn,
      securityGroupId: before.securityGroupId,
      targetGroups: before.targetGroups,
    });

    // A port added later gets a target group named like its siblings; nothing else is replaced.
    const grown = readNlbState((await ensure(withPort, after as ProviderState)).state);
    expect(grown.loadBalancerArn).toBe(before.loadBalancerArn);
    expect(grown.securityGroupId).toBe(before.securityGroupId);
    expect(grown.targetGroups?.['8080']?.name).toBe(
      `k8s-default-web-${legacyHash([c, 'default', 'web', 'uid-web', '8080', 'TCP', 30808])}`,
    );
    expect(grown.targetGroups?.['80']?.arn).toBe(before.targetGroups?.['80']?.arn);
    nlbWorld.expectedLeft = [...everythingOfWeb, 'target-group:8080 (default/web)'];
  });

  it('names the resources of a new Service from SHA-256', async () => {
    const fresh = readNlbState((await ensure(service())).state);
    const c = nlbWorld.cluster.settings.clusterName;
    expect(fresh.loadBalancerName).toMatch(/^k8s-default-web-[0-9a-z]{10}$/);
    expect(fresh.loadBalancerName).not.toBe(
      `k8s-default-web-${legacyHash([c, 'default', 'web', 'uid-web', 'internal'])}`,
    );
    // A later sync of the same Service keeps them.
    nlbWorld.cluster.recorder.reset();
    await ensure(service(), fresh as ProviderState);
    expect(nlbWorld.cluster.recorder.count('CreateTargetGroup')).toBe(0);
    nlbWorld.expectedLeft = everythingOfWeb;
  });
});
