import { describe, expect, it } from 'vitest';
import type { NlbClients } from '../../../functions/aws/clients';
import { executePlan } from '../../../functions/nlb/execute';
import { parseAnnotations } from '../../../functions/nlb/model/annotations';
import { buildDesiredLoadBalancer } from '../../../functions/nlb/model/desired';
import { ownershipTags } from '../../../functions/nlb/model/naming';
import type { Step } from '../../../functions/nlb/model/plan';
import { NlbProvider } from '../../../functions/nlb/nlb-provider';
import {
  consistencyWindowMs,
  createdWithinWindow,
  noteCreated,
  pruneCreated,
  readNlbState,
  toProviderState,
  type NlbState,
} from '../../../functions/nlb/nlb-state';
import {
  failureClassOf,
  RetryableError,
  TerminalError,
  errorKind,
} from '../../../functions/core/errors';
import { providerStateOf } from '../../../functions/sync/ports';
import { awsServiceError, notFound } from '../../support/aws-fault-model';
import { makeService } from '../../../kit/core-objects';

/**
 * Issue 31, finding 1: a lookup that finds nothing yet is never terminal, and a resource we
 * created and recorded is not forgotten because one read missed it. AWS answers "not found" for a
 * while after a create (eventual consistency); within `consistencyWindowMs` of the create that
 * means "not visible yet", outside it (or with no creation time) "gone", as before.
 */
const now = 1_800_000_000_000;
const service = makeService({
  uid: 'uid-1',
  ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }],
});
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
const tgArn = 'arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/k8s-tg/1';
const lbArn = 'arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/net/k8s-lb/1';
const ours = [
  { Key: ownershipTags.cluster, Value: 'c1' },
  { Key: ownershipTags.serviceUid, Value: 'uid-1' },
];
const foreign = [
  { Key: ownershipTags.cluster, Value: 'other' },
  { Key: ownershipTags.serviceUid, Value: 'uid-9' },
];

type Answer = (input: Record<string, unknown>) => unknown;

/** One stub for ELBv2, EC2 and the tagging API: each operation answers as `answers` says. */
function stubAws(answers: Record<string, Answer>) {
  const sent: string[] = [];
  const send = (command: { constructor: { name: string }; input: Record<string, unknown> }) => {
    const operation = command.constructor.name.replace(/Command$/, '');
    sent.push(operation);
    const answer = answers[operation];
    if (answer === undefined) return Promise.reject(new Error(`unexpected ${operation}`));
    try {
      return Promise.resolve(answer(command.input));
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  };
  const stub = { send };
  return { clients: { elbv2: stub, ec2: stub, tagging: stub } as unknown as NlbClients, sent };
}

const fails = (error: Error) => () => {
  throw error;
};
const throttled = awsServiceError('EC2', 'RequestLimitExceeded', 503, 'Request limit exceeded');

/** State with subnets already resolved, so Ensure goes straight to AWS's view of the resources. */
function stateWith(extra: NlbState): NlbState {
  return { subnets: { inputs: '["internal",null]', refs: subnets }, namingVersion: 2, ...extra };
}

function provider(clients: NlbClients) {
  return new NlbProvider(clients, settings, undefined, { now: () => now });
}

async function failureOf(run: Promise<unknown>): Promise<Error> {
  return run.then(
    () => {
      throw new Error('expected a failure');
    },
    (error: unknown) => error as Error,
  );
}

describe('a recorded resource AWS answers "not found" for (observe)', () => {
  const groupNotFound = fails(notFound('EC2', 'security group', 'sg-1'));

  it('within the window is not visible yet: retryable, kept in the state the error carries, not recreated', async () => {
    const { clients, sent } = stubAws({
      DescribeLoadBalancers: () => ({ LoadBalancers: [] }),
      DescribeSecurityGroups: groupNotFound,
    });
    const state = stateWith({ securityGroupId: 'sg-1', createdAt: { 'sg-1': now - 60_000 } });
    const error = await failureOf(
      provider(clients).ensureLoadBalancer(service, [host], toProviderState(state)),
    );

    expect(error).toBeInstanceOf(RetryableError);
    expect(errorKind(error)).toBe('retryable');
    expect(failureClassOf(error)).toBe('transient');
    expect(error.message).toMatch(/not visible yet: security group sg-1 \(created 60 s ago\)/);
    const kept = readNlbState(providerStateOf(error));
    expect(kept.securityGroupId).toBe('sg-1');
    expect(kept.createdAt).toEqual({ 'sg-1': now - 60_000 });
    expect(sent).not.toContain('CreateSecurityGroup');
  });

  it.each([
    ['past the window', { 'sg-1': now - consistencyWindowMs - 1 }],
    ['with no creation time (an older record, a group deleted by hand)', undefined],
  ])('%s means gone, as before: the group is made again', async (_, createdAt) => {
    const { clients, sent } = stubAws({
      DescribeLoadBalancers: () => ({ LoadBalancers: [] }),
      DescribeSecurityGroups: groupNotFound,
      // Stops the pass at the create, which is all this test is about.
      CreateSecurityGroup: fails(throttled),
    });
    const state = stateWith({ securityGroupId: 'sg-1', ...(createdAt ? { createdAt } : {}) });
    const error = await failureOf(
      provider(clients).ensureLoadBalancer(service, [host], toProviderState(state)),
    );

    expect(error.message).toMatch(/create security group: RequestLimitExceeded/);
    expect(sent).toContain('CreateSecurityGroup');
    const after = readNlbState(providerStateOf(error));
    expect(after.securityGroupId).toBeUndefined();
    expect(after.createdAt).toBeUndefined();
  });

  it('a recorded NLB and target group not found by ARN within the window are not visible yet', async () => {
    const { clients, sent } = stubAws({
      DescribeLoadBalancers: (input) => {
        if (input.LoadBalancerArns !== undefined)
          throw notFound('ElasticLoadBalancingV2', 'load balancer', lbArn);
        return { LoadBalancers: [] };
      },
      DescribeTargetGroups: fails(notFound('ElasticLoadBalancingV2', 'target group', tgArn)),
    });
    const recorded = stateWith({
      loadBalancerArn: lbArn,
      targetGroups: { '80': { arn: tgArn, name: 'k8s-tg', targets: [] } },
    });
    const lb = await failureOf(
      provider(clients).ensureLoadBalancer(
        service,
        [host],
        toProviderState({ ...recorded, createdAt: { [lbArn]: now - 1000 } }),
      ),
    );
    expect(lb.message).toMatch(/describe load balancers: not visible yet: load balancer arn:/);
    expect(readNlbState(providerStateOf(lb)).loadBalancerArn).toBe(lbArn);

    const { loadBalancerArn: _, ...withoutLb } = recorded;
    const tg = await failureOf(
      provider(clients).ensureLoadBalancer(
        service,
        [host],
        toProviderState({ ...withoutLb, createdAt: { [tgArn]: now - 1000 } }),
      ),
    );
    expect(tg.message).toMatch(/describe target groups: not visible yet: target group arn:/);
    expect(readNlbState(providerStateOf(tg)).targetGroups?.['80']?.arn).toBe(tgArn);
    expect(sent.filter((op) => op.startsWith('Create'))).toEqual([]);
  });
});

describe('a create AWS refuses as a duplicate while its lookup finds nothing yet (execute)', () => {
  const desired = buildDesiredLoadBalancer({
    service,
    hosts: [host],
    settings,
    options: parseAnnotations(service),
    subnets,
  });
  const run = (clients: NlbClients, steps: Step[], state: NlbState = {}, kept = {}) =>
    executePlan({
      clients,
      clusterName: 'c1',
      service,
      desired,
      plan: { steps, keptTargetGroups: kept },
      state,
      securityGroupId: state.securityGroupId,
      now: () => now,
    });
  const groupDuplicate = fails(awsServiceError('EC2', 'InvalidGroup.Duplicate', 400, 'exists'));
  const createGroup: Step[] = [{ kind: 'createSecurityGroup', group: desired.securityGroup }];

  it.each([
    ['the lookup finds nothing', { SecurityGroups: [] }],
    [
      'the lookup shows the group without tags',
      { SecurityGroups: [{ GroupId: 'sg-2', Tags: [] }] },
    ],
  ])('security group, %s: retryable, never terminal', async (_, found) => {
    const { clients } = stubAws({
      CreateSecurityGroup: groupDuplicate,
      DescribeSecurityGroups: () => found,
    });
    const error = await failureOf(run(clients, createGroup));
    expect(errorKind(error)).toBe('retryable');
    expect(error.message).toMatch(/create security group k8s-.*: not visible yet/);
  });

  it('security group whose tags prove another owner: terminal, as before', async () => {
    const { clients } = stubAws({
      CreateSecurityGroup: groupDuplicate,
      DescribeSecurityGroups: () => ({ SecurityGroups: [{ GroupId: 'sg-2', Tags: foreign }] }),
    });
    await expect(run(clients, createGroup)).rejects.toThrow(TerminalError);
  });

  it('target group whose name lookup answers TargetGroupNotFound: retryable, nothing recorded', async () => {
    const { clients } = stubAws({
      CreateTargetGroup: fails(
        Object.assign(new Error('exists'), {
          name: 'DuplicateTargetGroupNameException',
          Code: 'DuplicateTargetGroupName',
          $fault: 'client',
          $metadata: { httpStatusCode: 400 },
        }),
      ),
      DescribeTargetGroups: fails(notFound('ElasticLoadBalancingV2', 'target group', 'k8s')),
    });
    const state: NlbState = {};
    const error = await failureOf(
      run(clients, [{ kind: 'createTargetGroup', targetGroup: desired.targetGroups[0]! }], state),
    );
    expect(errorKind(error)).toBe('retryable');
    expect(error.message).toMatch(/create target group k8s-.*: not visible yet/);
    expect(state.targetGroups).toBeUndefined();
  });

  it('a created target group whose tags AWS does not show yet: retryable, only dated until they prove it ours', async () => {
    const { clients } = stubAws({
      CreateTargetGroup: () => ({ TargetGroups: [{ TargetGroupArn: tgArn }] }),
      DescribeTags: fails(notFound('ElasticLoadBalancingV2', 'target group', tgArn)),
    });
    const state: NlbState = {};
    const error = await failureOf(
      run(
        clients,
        [
          { kind: 'createTargetGroup', targetGroup: desired.targetGroups[0]! },
          { kind: 'verifyCreatedTargetGroups' },
        ],
        state,
      ),
    );
    expect(errorKind(error)).toBe('retryable');
    expect(error.message).toMatch(
      /verify created target groups: not visible yet: the tags of target group arn:/,
    );
    // Not recorded, but dated: a delete right after still finds it (and reads its tags first).
    const after = readNlbState(providerStateOf(error));
    expect(after.targetGroups).toBeUndefined();
    expect(after.createdAt).toEqual({ [tgArn]: now });
  });

  it('a load balancer name AWS says exists while its lookup finds none: retryable', async () => {
    const { clients } = stubAws({
      CreateLoadBalancer: fails(
        Object.assign(new Error('exists'), {
          name: 'DuplicateLoadBalancerNameException',
          Code: 'DuplicateLoadBalancerName',
          $fault: 'client',
          $metadata: { httpStatusCode: 400 },
        }),
      ),
      DescribeLoadBalancers: fails(notFound('ElasticLoadBalancingV2', 'load balancer', 'k8s')),
    });
    const error = await failureOf(
      run(
        clients,
        [{ kind: 'createLoadBalancer', loadBalancer: desired }],
        { securityGroupId: 'sg-1' },
        {},
      ),
    );
    expect(errorKind(error)).toBe('retryable');
    expect(error.message).toMatch(/create load balancer k8s-.*: not visible yet/);
  });

  it('a call naming a target group made within the window that answers TargetGroupNotFound: not visible yet, ARN kept', async () => {
    const key = desired.targetGroups[0]!.key;
    const { clients } = stubAws({
      RegisterTargets: fails(notFound('ElasticLoadBalancingV2', 'target group', tgArn)),
    });
    const state: NlbState = {
      targetGroups: { [key]: { arn: tgArn, name: 'k8s-tg', targets: [] } },
      createdAt: { [tgArn]: now - 2000 },
    };
    const error = await failureOf(
      run(clients, [{ kind: 'registerTargets', key, targets: [host.instanceId] }], state, {
        [key]: tgArn,
      }),
    );
    expect(errorKind(error)).toBe('retryable');
    expect(error.message).toMatch(
      /register 1 targets for port .*: not visible yet: target group arn:.* \(created 2 s ago\)/,
    );
    expect(readNlbState(providerStateOf(error)).targetGroups?.[key]?.arn).toBe(tgArn);
  });

  it('dates each create as it returns, and forgets the dates once a plan has run to the end', async () => {
    const { clients } = stubAws({
      CreateSecurityGroup: () => ({ GroupId: 'sg-new' }),
      AuthorizeSecurityGroupIngress: fails(notFound('EC2', 'security group', 'sg-new')),
    });
    const state: NlbState = {};
    const error = await failureOf(
      run(
        clients,
        [...createGroup, { kind: 'authorizeIngress', rules: desired.securityGroup.ingress }],
        state,
      ),
    );
    expect(error.message).toMatch(/authorize ingress: not visible yet: security group sg-new/);
    expect(readNlbState(providerStateOf(error)).createdAt).toEqual({ 'sg-new': now });

    const done = stubAws({ AuthorizeSecurityGroupIngress: () => ({}) });
    const after: NlbState = { securityGroupId: 'sg-new', createdAt: { 'sg-new': now } };
    await executePlan({
      clients: done.clients,
      clusterName: 'c1',
      service,
      desired,
      plan: {
        steps: [{ kind: 'authorizeIngress', rules: desired.securityGroup.ingress }],
        keptTargetGroups: {},
      },
      state: after,
      securityGroupId: 'sg-new',
      now: () => now,
    });
    expect(after.createdAt).toBeUndefined();
  });
});

describe('deleting resources AWS does not show yet (ensureLoadBalancerDeleted)', () => {
  const nothingTagged = () => ({ ResourceTagMappingList: [] });

  it('a recorded group made within the window that AWS does not find is kept and the delete requeued', async () => {
    const { clients, sent } = stubAws({
      GetResources: nothingTagged,
      DescribeSecurityGroups: fails(notFound('EC2', 'security group', 'sg-1')),
    });
    const p = provider(clients);
    const state = toProviderState({ securityGroupId: 'sg-1', createdAt: { 'sg-1': now - 5000 } });
    expect((await p.getLoadBalancer(service, state)).exists).toBe(true);
    const result = await p.ensureLoadBalancerDeleted(service, state);

    expect(result.requeueAfterSeconds).toBeGreaterThan(0);
    expect(readNlbState(result.state)).toMatchObject({
      securityGroupId: 'sg-1',
      createdAt: { 'sg-1': now - 5000 },
    });
    expect(sent).not.toContain('DeleteSecurityGroup');
  });

  it('outside the window it is gone, and forgotten, as before', async () => {
    const { clients } = stubAws({
      GetResources: nothingTagged,
      DescribeSecurityGroups: fails(notFound('EC2', 'security group', 'sg-1')),
    });
    const state = toProviderState({
      securityGroupId: 'sg-1',
      createdAt: { 'sg-1': now - consistencyWindowMs - 1 },
    });
    const result = await provider(clients).ensureLoadBalancerDeleted(service, state);
    expect(result.requeueAfterSeconds).toBeUndefined();
    expect(result.state).toEqual({});
  });

  it('a delete answered "not found" within the window is not proven: the target group stays recorded', async () => {
    const { clients } = stubAws({
      GetResources: () => ({ ResourceTagMappingList: [{ ResourceARN: tgArn, Tags: ours }] }),
      DeleteTargetGroup: fails(notFound('ElasticLoadBalancingV2', 'target group', tgArn)),
    });
    const state = toProviderState({
      targetGroups: { '80': { arn: tgArn, name: 'k8s-tg' } },
      createdAt: { [tgArn]: now - 1000 },
    });
    const result = await provider(clients).ensureLoadBalancerDeleted(service, state);
    expect(result.requeueAfterSeconds).toBeGreaterThan(0);
    expect(
      Object.values(readNlbState(result.state).targetGroups ?? {}).map((tg) => tg.arn),
    ).toEqual([tgArn]);
  });
});

describe('deleting a target group only dated (created, its tags not read yet)', () => {
  const state = toProviderState({ createdAt: { [tgArn]: now - 1000 } });

  it('is kept while AWS does not show its tags, and deleted once they prove it ours', async () => {
    const hidden = stubAws({
      GetResources: () => ({ ResourceTagMappingList: [] }),
      DescribeTags: fails(notFound('ElasticLoadBalancingV2', 'target group', tgArn)),
    });
    const kept = await provider(hidden.clients).ensureLoadBalancerDeleted(service, state);
    expect(kept.requeueAfterSeconds).toBeGreaterThan(0);
    expect(readNlbState(kept.state).createdAt).toEqual({ [tgArn]: now - 1000 });

    const shown = stubAws({
      GetResources: () => ({ ResourceTagMappingList: [] }),
      DescribeTags: () => ({ TagDescriptions: [{ ResourceArn: tgArn, Tags: ours }] }),
      DeleteTargetGroup: () => ({}),
    });
    const done = await provider(shown.clients).ensureLoadBalancerDeleted(service, kept.state);
    expect(shown.sent).toContain('DeleteTargetGroup');
    expect(done.requeueAfterSeconds).toBeUndefined();
    expect(done.state).toEqual({});
  });

  it('is left alone and forgotten when its tags name another owner', async () => {
    const { clients, sent } = stubAws({
      GetResources: () => ({ ResourceTagMappingList: [] }),
      DescribeTags: () => ({ TagDescriptions: [{ ResourceArn: tgArn, Tags: foreign }] }),
    });
    const result = await provider(clients).ensureLoadBalancerDeleted(service, state);
    expect(sent).not.toContain('DeleteTargetGroup');
    expect(result.state).toEqual({});
  });
});

describe('creation times in provider state', () => {
  it('keep the first create, count within the window either side of now, and are pruned past it', () => {
    const state: NlbState = {};
    noteCreated(state, 'sg-1', now);
    noteCreated(state, 'sg-1', now + 10_000);
    expect(state.createdAt).toEqual({ 'sg-1': now });
    expect(createdWithinWindow(state, 'sg-1', now + consistencyWindowMs - 1)).toBe(true);
    expect(createdWithinWindow(state, 'sg-1', now - 1000)).toBe(true);
    expect(createdWithinWindow(state, 'sg-1', now + consistencyWindowMs)).toBe(false);
    expect(createdWithinWindow(state, 'sg-2', now)).toBe(false);
    pruneCreated(state, now + consistencyWindowMs);
    expect(state.createdAt).toBeUndefined();
  });
});
