import type { EC2Client } from '@aws-sdk/client-ec2';
import type { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import { describe, expect, it } from 'vitest';
import { ownershipTags } from '../../../functions/nlb/model/naming';
import {
  describeElbv2Tags,
  describeSecurityGroupTags,
  sortByOwnership,
} from '../../../functions/nlb/ownership';
import { makeService } from '../../../kit/core-objects';

const awsError = (name: string) =>
  Object.assign(new Error(name), { name, $fault: 'client', $metadata: { httpStatusCode: 400 } });

/**
 * AWS refuses a whole DescribeTags (or DescribeSecurityGroups) call when one of its resources is
 * gone; moto answers with empty tags instead, so this rule is tested against a stub.
 */
describe('describeElbv2Tags', () => {
  const ours = { [ownershipTags.cluster]: 'c1', [ownershipTags.serviceUid]: 'uid-1' };

  function stub(gone: ReadonlySet<string>) {
    const calls: string[][] = [];
    const elbv2 = {
      send: (command: { input: { ResourceArns: string[] } }) => {
        const arns = command.input.ResourceArns;
        calls.push(arns);
        if (arns.length > 20) return Promise.reject(awsError('ValidationError'));
        if (arns.some((arn) => gone.has(arn)))
          return Promise.reject(awsError('TargetGroupNotFound'));
        return Promise.resolve({
          TagDescriptions: arns.map((ResourceArn) => ({
            ResourceArn,
            Tags: Object.entries(ours).map(([Key, Value]) => ({ Key, Value })),
          })),
        });
      },
    } as unknown as ElasticLoadBalancingV2Client;
    return { elbv2, calls };
  }

  it('asks for at most 20 ARNs a call', async () => {
    const arns = Array.from({ length: 45 }, (_, i) => `arn:tg/${i}`);
    const { elbv2, calls } = stub(new Set());
    const tags = await describeElbv2Tags(elbv2, arns);
    expect(calls.map((c) => c.length)).toEqual([20, 20, 5]);
    expect(tags.size).toBe(45);
  });

  it('asks one by one when AWS refuses a call for a resource that is gone, and leaves that one out', async () => {
    const { elbv2, calls } = stub(new Set(['arn:tg/gone']));
    const tags = await describeElbv2Tags(elbv2, ['arn:tg/a', 'arn:tg/gone', 'arn:tg/b']);
    expect([...tags.keys()].sort()).toEqual(['arn:tg/a', 'arn:tg/b']);
    expect(calls).toHaveLength(4);
  });

  it('passes other errors on', async () => {
    const elbv2 = {
      send: () => Promise.reject(awsError('AccessDenied')),
    } as unknown as ElasticLoadBalancingV2Client;
    await expect(describeElbv2Tags(elbv2, ['arn:tg/a'])).rejects.toThrow('AccessDenied');
  });
});

describe('describeSecurityGroupTags', () => {
  it('asks one by one when a group is gone (InvalidGroup.NotFound), and leaves that one out', async () => {
    const ec2 = {
      send: (command: { input: { GroupIds: string[] } }) =>
        command.input.GroupIds.includes('sg-gone')
          ? Promise.reject(awsError('InvalidGroup.NotFound'))
          : Promise.resolve({
              SecurityGroups: command.input.GroupIds.map((GroupId) => ({
                GroupId,
                Tags: [{ Key: 'k', Value: 'v' }],
              })),
            }),
    } as unknown as EC2Client;
    const tags = await describeSecurityGroupTags(ec2, ['sg-a', 'sg-gone']);
    expect([...tags.keys()]).toEqual(['sg-a']);
  });
});

describe('sortByOwnership', () => {
  const service = makeService({ uid: 'uid-1' });
  it('sorts by cluster and Service UID tags; untagged or unanswered resources are unknown', () => {
    const tags = new Map<string, Record<string, string>>([
      ['ours', { [ownershipTags.cluster]: 'c1', [ownershipTags.serviceUid]: 'uid-1' }],
      ['other-service', { [ownershipTags.cluster]: 'c1', [ownershipTags.serviceUid]: 'uid-2' }],
      ['other-cluster', { [ownershipTags.cluster]: 'c2', [ownershipTags.serviceUid]: 'uid-1' }],
      ['untagged', {}],
    ]);
    expect(
      sortByOwnership(
        ['ours', 'other-service', 'other-cluster', 'untagged', 'gone'],
        tags,
        'c1',
        service,
      ),
    ).toEqual({
      ours: ['ours'],
      foreign: ['other-service', 'other-cluster'],
      unknown: ['untagged', 'gone'],
    });
  });
});
