import type { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import { describe, expect, it } from 'vitest';
import type { NlbClients } from '../../../functions/aws/clients';
import { executePlan, stepBatches } from '../../../functions/nlb/execute';
import { parseAnnotations } from '../../../functions/nlb/model/annotations';
import { buildDesiredLoadBalancer } from '../../../functions/nlb/model/desired';
import type { NlbState } from '../../../functions/nlb/nlb-state';
import { TerminalError } from '../../../functions/core/errors';
import { providerStateOf } from '../../../functions/sync/ports';
import { makeService } from '../../../kit/core-objects';

/**
 * AWS answers CreateTargetGroup for a name that exists with the same settings by returning the
 * existing group; moto does not emulate that, so this path is tested with a stubbed ELBv2 client.
 */
const settings = {
  clusterName: 'c1',
  vpcId: 'vpc-1',
  defaultScheme: 'internal' as const,
  defaultSslPolicy: 'ELBSecurityPolicy-TLS13-1-2-2021-06',
  defaultTags: {},
};
const host = {
  name: 'a',
  providerID: 'aws:///z/i-0000000000000000a',
  instanceId: 'i-0000000000000000a',
};
const subnets = [{ subnetId: 'subnet-a', availabilityZone: 'us-east-1a' }];

describe('executePlan: a target group AWS hands back from CreateTargetGroup', () => {
  it('is never recorded before its tags are read: a failure between create and check carries no foreign ARN', async () => {
    const service = makeService({
      uid: 'uid-1',
      ports: [
        { name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 },
        { name: 'https', protocol: 'TCP', port: 443, nodePort: 30443 },
      ],
    });
    const desired = buildDesiredLoadBalancer({
      service,
      hosts: [host],
      settings,
      options: parseAnnotations(service),
      subnets,
    });
    const sent: string[] = [];
    let creates = 0;
    const elbv2 = {
      send: (command: { constructor: { name: string } }) => {
        sent.push(command.constructor.name);
        if (command.constructor.name === 'CreateTargetGroupCommand') {
          creates++;
          // The first name is taken by someone else's group, which AWS hands back; the second
          // create is throttled until the SDK gives up, so the run stops before the tag check.
          if (creates === 1)
            return Promise.resolve({ TargetGroups: [{ TargetGroupArn: 'arn:foreign-tg' }] });
          return Promise.reject(
            Object.assign(new Error('Rate exceeded'), {
              name: 'Throttling',
              $fault: 'client',
              $metadata: { httpStatusCode: 400 },
            }),
          );
        }
        return Promise.resolve({
          TagDescriptions: [
            { ResourceArn: 'arn:foreign-tg', Tags: [{ Key: 'owner', Value: 'someone-else' }] },
          ],
        });
      },
    } as unknown as ElasticLoadBalancingV2Client;
    const state: NlbState = {};
    const failure = await executePlan({
      clients: { elbv2 } as unknown as NlbClients,
      clusterName: 'c1',
      service,
      desired,
      plan: {
        steps: [
          { kind: 'createTargetGroup', targetGroup: desired.targetGroups[0]! },
          { kind: 'createTargetGroup', targetGroup: desired.targetGroups[1]! },
          { kind: 'verifyCreatedTargetGroups' },
        ],
        keptTargetGroups: {},
      },
      state,
    }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeDefined();
    // What the sync would save to DynamoDB: the foreign group must not be in it, or a later
    // delete or host update would act on it.
    expect(JSON.stringify(providerStateOf(failure))).not.toContain('arn:foreign-tg');
    expect(JSON.stringify(state)).not.toContain('arn:foreign-tg');
    expect(
      sent.filter((name) => name !== 'CreateTargetGroupCommand' && name !== 'DescribeTagsCommand'),
    ).toEqual([]);
  });

  it('is checked by its tags and, when someone else owns it, forgotten and left untouched', async () => {
    const service = makeService({
      uid: 'uid-1',
      ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }],
    });
    const desired = buildDesiredLoadBalancer({
      service,
      hosts: [
        {
          name: 'a',
          providerID: 'aws:///z/i-0000000000000000a',
          instanceId: 'i-0000000000000000a',
        },
      ],
      settings: {
        clusterName: 'c1',
        vpcId: 'vpc-1',
        defaultScheme: 'internal',
        defaultSslPolicy: 'ELBSecurityPolicy-TLS13-1-2-2021-06',
        defaultTags: {},
      },
      options: parseAnnotations(service),
      subnets: [{ subnetId: 'subnet-a', availabilityZone: 'us-east-1a' }],
    });
    const sent: string[] = [];
    const elbv2 = {
      send: (command: { constructor: { name: string } }) => {
        sent.push(command.constructor.name);
        if (command.constructor.name === 'CreateTargetGroupCommand') {
          return Promise.resolve({ TargetGroups: [{ TargetGroupArn: 'arn:foreign-tg' }] });
        }
        return Promise.resolve({
          TagDescriptions: [
            { ResourceArn: 'arn:foreign-tg', Tags: [{ Key: 'owner', Value: 'someone-else' }] },
          ],
        });
      },
    } as unknown as ElasticLoadBalancingV2Client;
    const state: NlbState = {};
    const run = executePlan({
      clients: { elbv2 } as unknown as NlbClients,
      clusterName: 'c1',
      service,
      desired,
      plan: {
        steps: [
          { kind: 'createTargetGroup', targetGroup: desired.targetGroups[0]! },
          { kind: 'verifyCreatedTargetGroups' },
          { kind: 'registerTargets', key: '80', targets: ['i-0000000000000000a'] },
        ],
        keptTargetGroups: {},
      },
      state,
    });
    await expect(run).rejects.toThrow(TerminalError);
    await expect(run).rejects.toThrow(/not owned by this Service/);
    expect(sent).toEqual(['CreateTargetGroupCommand', 'DescribeTagsCommand']);
    expect(state.targetGroups ?? {}).toEqual({});
  });
});

describe('which plan steps go side by side (issue 37: a create in fewer round trips)', () => {
  const tg = (key: string) => ({
    kind: 'modifyTargetGroup' as const,
    key,
    healthCheck: {} as never,
  });
  it('consecutive steps of one independent kind form a batch; the order between kinds stays', () => {
    const steps = [
      { kind: 'createSecurityGroup', group: {} },
      { kind: 'authorizeIngress', rules: [] },
      tg('80'),
      tg('443'),
      { kind: 'registerTargets', key: '80', targets: ['i-1'] },
      { kind: 'registerTargets', key: '443', targets: ['i-1'] },
      { kind: 'createLoadBalancer', loadBalancer: {} },
      { kind: 'verifyCreatedTargetGroups' },
      { kind: 'verifyCreatedTargetGroups' },
    ] as unknown as Parameters<typeof stepBatches>[0];
    expect(stepBatches(steps).map((batch) => batch.map((step) => step.kind))).toEqual([
      ['createSecurityGroup'],
      ['authorizeIngress'],
      ['modifyTargetGroup', 'modifyTargetGroup'],
      ['registerTargets', 'registerTargets'],
      ['createLoadBalancer'],
      // Not of an independent kind: one at a time, even when repeated.
      ['verifyCreatedTargetGroups'],
      ['verifyCreatedTargetGroups'],
    ]);
  });
});
