/**
 * The propagation simulation's pod targets (issue 36): the fake ELBv2's `ip` target groups
 * (bench/sim/fake-aws.ts) and the scenario that measures an endpoint turning ready until its
 * target is registered (bench/scenarios/propagation-pods.ts). Virtual time: call counts only.
 */
import {
  DeregisterTargetsCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
  RegisterTargetsCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { describe, expect, it } from 'vitest';
import { simulatePodTargets } from '../../../bench/scenarios/propagation-pods';
import { FakeAwsAccount } from '../../../bench/sim/fake-aws';
import { VirtualClock } from '../../../bench/sim/virtual-clock';

const lb = 'arn:lb/1';
const podGroup = 'arn:tg/pods';
const nodeGroup = 'arn:tg/nodes';

function account(clock: VirtualClock): FakeAwsAccount {
  const aws = new FakeAwsAccount(clock, 50);
  const common = { serviceKey: 'default/web', serviceUid: 'uid-1', loadBalancerArn: lb };
  aws.addTargetGroup({
    ...common,
    arn: podGroup,
    targetType: 'ip',
    port: 8080,
    targets: ['10.0.0.1:8080'],
  });
  aws.addTargetGroup({ ...common, arn: nodeGroup, targets: ['i-1'] });
  return aws;
}

describe('fake ELBv2 with ip target groups', () => {
  it('registers pods by ip and port, and describes them with their Port', async () => {
    const clock = new VirtualClock();
    const aws = account(clock);
    const described = await clock.run(
      (async () => {
        await aws.attempt(
          'elbv2',
          new RegisterTargetsCommand({
            TargetGroupArn: podGroup,
            // The second takes the group's port, as AWS does.
            Targets: [{ Id: '10.0.0.2', Port: 9090 }, { Id: '10.0.0.3' }],
          }),
        );
        await aws.attempt(
          'elbv2',
          new DeregisterTargetsCommand({
            TargetGroupArn: podGroup,
            Targets: [{ Id: '10.0.0.1', Port: 8080 }],
          }),
        );
        return aws.attempt('elbv2', new DescribeTargetHealthCommand({ TargetGroupArn: podGroup }));
      })(),
      60_000,
    );
    expect(aws.targetGroups.get(podGroup)?.targets).toEqual(
      new Set(['10.0.0.2:9090', '10.0.0.3:8080']),
    );
    expect(described).toEqual({
      TargetHealthDescriptions: [
        { Target: { Id: '10.0.0.2', Port: 9090 }, TargetHealth: { State: 'healthy' } },
        { Target: { Id: '10.0.0.3', Port: 8080 }, TargetHealth: { State: 'healthy' } },
      ],
    });
  });

  it('keeps instance groups by ID, and names each group its TargetType', async () => {
    const clock = new VirtualClock();
    const aws = account(clock);
    const [byLoadBalancer, byArn] = await clock.run(
      (async () => {
        await aws.attempt(
          'elbv2',
          new RegisterTargetsCommand({ TargetGroupArn: nodeGroup, Targets: [{ Id: 'i-2' }] }),
        );
        return [
          await aws.attempt('elbv2', new DescribeTargetGroupsCommand({ LoadBalancerArn: lb })),
          await aws.attempt(
            'elbv2',
            new DescribeTargetGroupsCommand({ TargetGroupArns: [nodeGroup] }),
          ),
        ];
      })(),
      60_000,
    );
    expect(aws.targetGroups.get(nodeGroup)?.targets).toEqual(new Set(['i-1', 'i-2']));
    expect(byLoadBalancer).toEqual({
      TargetGroups: [
        { TargetGroupArn: podGroup, TargetType: 'ip', Port: 8080, LoadBalancerArns: [lb] },
        { TargetGroupArn: nodeGroup, TargetType: 'instance', LoadBalancerArns: [lb] },
      ],
    });
    expect(byArn).toEqual({
      TargetGroups: [{ TargetGroupArn: nodeGroup, TargetType: 'instance', LoadBalancerArns: [lb] }],
    });
  });
});

describe('pod-target propagation scenario', () => {
  it('one Service: one targets sync, with one DescribeTags and a RegisterTargets per group', async () => {
    const run = await simulatePodTargets(1);
    expect(run.syncs).toBe(1);
    expect(run.elbv2ByOperation).toEqual({ DescribeTags: 1, RegisterTargets: 2 });
    expect(run.kubeCalls).toBe(2);
    expect(run.syncRetries).toBe(0);
  });

  it('100 Services: every new pod registered once, no full sync, nothing throttled', async () => {
    const run = await simulatePodTargets(100);
    expect(Number.isFinite(run.maxMs)).toBe(true);
    expect(run.elbv2ByOperation.RegisterTargets).toBe(200);
    // A pass the budget sends back is a targets sync again, never an Ensure's calls.
    expect(Object.keys(run.elbv2ByOperation).sort()).toEqual(['DescribeTags', 'RegisterTargets']);
    expect(run.syncs).toBe(100 + run.budgetRequeues);
    expect(run.throttledAttempts).toBe(0);
  });
});
