import { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import { RegisterTargetsCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
import { describe, expect, it } from 'vitest';
import { addRateLimits, type NlbClients } from '../../../functions/aws/clients';
import { ownershipTags } from '../../../functions/nlb/model/naming';
import { NlbProvider } from '../../../functions/nlb/nlb-provider';
import { toProviderState } from '../../../functions/nlb/nlb-state';
import { RegistrationBudget, type BudgetStore } from '../../../functions/aws/registration-budget';
import { RequeueAfterError } from '../../../functions/core/errors';
import type { Host } from '../../../functions/core/hosts';
import { makeService } from '../../../kit/core-objects';

const service = makeService({ name: 'web', namespace: 'default', uid: 'uid-1' });
const host = (id: string): Host => ({
  name: id,
  providerID: `aws:///us-east-1a/${id}`,
  instanceId: id,
});

/** ELBv2 as a recording stub: DescribeTags says every group is ours; writes are logged. */
function recordingClients(): { clients: NlbClients; calls: string[] } {
  const calls: string[] = [];
  const send = (command: { constructor: { name: string }; input: Record<string, unknown> }) => {
    const operation = command.constructor.name.replace(/Command$/, '');
    if (operation === 'DescribeTags') {
      const arns = command.input.ResourceArns as string[];
      return Promise.resolve({
        TagDescriptions: arns.map((ResourceArn) => ({
          ResourceArn,
          Tags: [
            { Key: ownershipTags.cluster, Value: 'c1' },
            { Key: ownershipTags.service, Value: 'default/web' },
            { Key: ownershipTags.serviceUid, Value: 'uid-1' },
          ],
        })),
      });
    }
    const tg = String(command.input.TargetGroupArn).split('/').at(-1);
    const ids = (command.input.Targets as { Id: string }[]).map((t) => t.Id).join(',');
    calls.push(`${operation} ${tg} ${ids}`);
    return Promise.resolve({});
  };
  const stub = { send } as unknown;
  return {
    clients: { elbv2: stub, ec2: stub, tagging: stub } as NlbClients,
    calls,
  };
}

function stateWith(targets: Record<string, string[]>) {
  return toProviderState({
    loadBalancerArn: 'arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/net/lb/1',
    targetGroups: Object.fromEntries(
      Object.entries(targets).map(([port, ids]) => [
        `${port}/TCP`,
        {
          arn: `arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/tg/${port}`,
          name: `tg-${port}`,
          targets: ids,
        },
      ]),
    ),
  });
}

const settings = {
  clusterName: 'c1',
  vpcId: 'vpc-1',
  defaultScheme: 'internal' as const,
  defaultSslPolicy: 'p',
  defaultTags: {},
};

describe('host updates send removals first', () => {
  it('deregisters gone instances from every target group before registering new ones', async () => {
    const { clients, calls } = recordingClients();
    const provider = new NlbProvider(clients, settings);
    const result = await provider.updateLoadBalancer(
      service,
      [host('b'), host('c')],
      stateWith({ 80: ['a', 'b'], 443: ['a', 'b'] }),
    );
    expect(calls).toEqual([
      'DeregisterTargets 80 a',
      'DeregisterTargets 443 a',
      'RegisterTargets 80 c',
      'RegisterTargets 443 c',
    ]);
    expect(result.instances).toEqual(['b', 'c']);
  });

  it('registers first where deregistering would leave a target group empty', async () => {
    const { clients, calls } = recordingClients();
    const provider = new NlbProvider(clients, settings);
    await provider.updateLoadBalancer(
      service,
      [host('b'), host('c')],
      stateWith({ 80: ['a'], 443: ['a', 'b'] }),
    );
    expect(calls).toEqual([
      'DeregisterTargets 443 a',
      'RegisterTargets 80 b,c',
      'RegisterTargets 443 c',
      'DeregisterTargets 80 a',
    ]);
  });
});

describe('the ELBv2 client with a registration budget', () => {
  it('fails a registration the budget will not book with RequeueAfterError, sending nothing and retrying nothing', async () => {
    let bookings = 0;
    const fullUp: BudgetStore = {
      book: () => {
        bookings++;
        return Promise.resolve({ kind: 'later', inMs: 4_200 });
      },
    };
    // Nothing listens on port 9: a request that got out would fail with a network error.
    const client = new ElasticLoadBalancingV2Client({
      region: 'us-east-1',
      endpoint: 'http://127.0.0.1:9',
      credentials: { accessKeyId: 'x', secretAccessKey: 'y' },
      maxAttempts: 3,
    });
    addRateLimits(client, {
      registration: new RegistrationBudget(fullUp, { perSecond: 4, burst: 10 }),
    });
    const error = await client
      .send(new RegisterTargetsCommand({ TargetGroupArn: 'arn:tg', Targets: [{ Id: 'i-1' }] }))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequeueAfterError);
    expect((error as RequeueAfterError).seconds).toBe(5);
    expect(bookings).toBe(1);
  });
});

describe('host updates of large target groups (a stub stands in for ELBv2: no emulator here holds hundreds of instances cheaply)', () => {
  it('registers in batches of at most 200 targets per call', async () => {
    const { clients, calls } = recordingClients();
    const provider = new NlbProvider(clients, settings);
    const hosts = Array.from({ length: 450 }, (_, i) => host(`i-${String(i).padStart(4, '0')}`));
    await provider.updateLoadBalancer(service, hosts, stateWith({ 80: [] }));
    expect(calls.map((c) => c.split(',').length)).toEqual([200, 200, 50]);
    expect(calls.every((c) => c.startsWith('RegisterTargets 80 '))).toBe(true);
  });
});
