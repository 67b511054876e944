import type { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import { describe, expect, it } from 'vitest';
import type { NlbClients } from '../../../functions/aws/clients';
import { executePlan } from '../../../functions/aws/execute';
import { parseAnnotations } from '../../../functions/aws/model/annotations';
import { buildDesiredLoadBalancer } from '../../../functions/aws/model/desired';
import type { NlbState } from '../../../functions/aws/nlb-state';
import { TerminalError } from '../../../functions/core/errors';
import { makeService } from '../../support/core-objects';

/**
 * AWS answers CreateTargetGroup for a name that exists with the same settings by returning the
 * existing group; moto does not emulate that, so this path is tested with a stubbed ELBv2 client.
 */
describe('executePlan: a target group AWS hands back from CreateTargetGroup', () => {
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
    expect(state.targetGroups).toEqual({});
  });
});
