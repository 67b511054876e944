import { DescribeSecurityGroupsCommand, EC2Client } from '@aws-sdk/client-ec2';
import {
  DescribeLoadBalancersCommand,
  DescribeTargetGroupsCommand,
  ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { ResourceGroupsTaggingAPIClient } from '@aws-sdk/client-resource-groups-tagging-api';
import { describe, expect, it } from 'vitest';
import { addRateLimits, type NlbClients } from '../../functions/aws/clients';
import { NlbProvider } from '../../functions/nlb/nlb-provider';
import { readNlbState } from '../../functions/nlb/nlb-state';
import { upstreamFinalizer, type ClaimPolicy } from '../../functions/core/claim';
import { errorMessage } from '../../functions/core/errors';
import type { Service, ServicePort } from '../../functions/core/objects';
import type { ProviderState } from '../../functions/sync/ports';
import type { SyncOutcome } from '../../functions/sync/outcome';
import { syncService } from '../../functions/sync/sync-service';
import { createAwsCluster, type AwsCluster } from '../../kit/aws-cluster';
import { AwsFaultModel } from '../support/aws-fault-model';
import { makeNode, makeService } from '../../kit/core-objects';
import { inMemoryWorld } from '../../kit/in-memory';
import { MotoAccount } from '../../kit/moto';
import { inventory, surplus } from './support/inventory';
import { recordPending, recordScenario, type ScenarioResult } from './support/summary';
import { boundedRetry } from '../../functions/aws/bounded-retry';
import { callerRoleOption } from '../../functions/aws/caller-role';

/**
 * What AWS does that moto does not (test/support/aws-fault-model.ts), against the real use case
 * with moto behind it: resources AWS does not show yet right after their create, answers lost
 * after the change was made, and AWS's answers to a repeated create. Each run is one phase of a
 * Service's life (create, update, delete) with faults on, synced until done as the queue would
 * redeliver, then judged against the account's inventory: converged, nothing made twice or left
 * over, no recorded ID forgotten while its resource still existed, and never a terminal outcome.
 */

const claim: ClaimPolicy = { loadBalancerClass: 'x.io/nlb', claimClassless: true };
const key = 'default/web';
const updatedPorts: ServicePort[] = [
  { name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 },
  { name: 'admin', protocol: 'TCP', port: 8443, nodePort: 30843 },
];
const healthCheckInterval = 'service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval';

type Phase = 'create' | 'update' | 'delete';

interface Run {
  readonly phase: Phase;
  /** What the run does, for the failure list. */
  readonly label: string;
  /** The faults, switched on for the phase's syncs. */
  readonly faults: (model: AwsFaultModel) => void;
  /**
   * Update and delete: the create before runs once with the faults on too (its pass fails), so
   * the change comes right after the create, within the consistency window. Otherwise the
   * Service is created cleanly first.
   */
  readonly rightAfterCreate?: boolean;
  /** Create: a change to the Service between the first (faulty) pass and the rest. */
  readonly thenChange?: (service: Service) => Service;
}

type World = ReturnType<typeof inMemoryWorld>;

/** The provider's clients on the account, with the fault model in front of moto. */
function faultyClients(account: MotoAccount, model: AwsFaultModel): NlbClients {
  // As createRuntime builds them: each client its own bounded retry strategy (issue 37).
  const role = () => ({ ...callerRoleOption('functions'), ...boundedRetry(3, 'handBack') });
  const elbv2 = model.attach(account.client(ElasticLoadBalancingV2Client, role()));
  addRateLimits(elbv2);
  return {
    elbv2,
    ec2: model.attach(account.client(EC2Client, role())),
    tagging: model.attach(account.client(ResourceGroupsTaggingAPIClient, role())),
  };
}

function changeFor(phase: 'update' | 'delete', live: Service): Service {
  return phase === 'update'
    ? {
        ...live,
        metadata: { ...live.metadata, annotations: { [healthCheckInterval]: '30' } },
        spec: { ...live.spec, ports: updatedPorts },
      }
    : { ...live, metadata: { ...live.metadata, deletionTimestamp: '2026-11-30T12:00:00Z' } };
}

function change(world: World, edit: (service: Service) => Service): void {
  world.kube.put(edit(world.kube.stored('default', 'web') as Service));
}

/** IDs and ARNs the Service's record holds. */
function recordedIds(world: World): string[] {
  const state: ProviderState | undefined = world.state.records.get(key)?.provider;
  const nlb = readNlbState(state);
  return [
    ...(nlb.securityGroupId ? [nlb.securityGroupId] : []),
    ...(nlb.loadBalancerArn ? [nlb.loadBalancerArn] : []),
    ...Object.values(nlb.targetGroups ?? {}).map((tg) => tg.arn),
  ];
}

/** Whether the resource still exists, asked of moto itself. */
async function stillExists(account: MotoAccount, id: string): Promise<boolean> {
  try {
    if (id.startsWith('sg-')) {
      const found = await account
        .client(EC2Client)
        .send(new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'group-id', Values: [id] }] }));
      return (found.SecurityGroups ?? []).length > 0;
    }
    const elbv2 = account.client(ElasticLoadBalancingV2Client);
    if (id.includes(':targetgroup/')) {
      await elbv2.send(new DescribeTargetGroupsCommand({ TargetGroupArns: [id] }));
    } else {
      await elbv2.send(new DescribeLoadBalancersCommand({ LoadBalancerArns: [id] }));
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * Syncs until done, as the queue would redeliver a retry or a requeue. After every pass, an ID
 * the record no longer holds must be gone from AWS: a resource we created and recorded is never
 * forgotten while it exists.
 */
async function syncUntilDone(
  world: World,
  provider: NlbProvider,
  account: MotoAccount,
  outcomes: string[],
  problems: string[],
  passes = 16,
): Promise<SyncOutcome> {
  let outcome: SyncOutcome = { kind: 'done' };
  for (let pass = 0; pass < passes; pass++) {
    outcome = await syncPass(world, provider, account, outcomes, problems);
    if (outcome.kind === 'done') return outcome;
  }
  return outcome;
}

async function syncPass(
  world: World,
  provider: NlbProvider,
  account: MotoAccount,
  outcomes: string[],
  problems: string[],
): Promise<SyncOutcome> {
  const before = recordedIds(world);
  const outcome = await syncService(key, { ...world.deps, provider });
  const error = 'error' in outcome ? `: ${errorMessage(outcome.error)}` : '';
  outcomes.push(`${outcome.kind}${error}`);
  if (outcome.kind === 'terminal') problems.push(`terminal: ${errorMessage(outcome.error)}`);
  const after = new Set(recordedIds(world));
  for (const id of before.filter((id) => !after.has(id))) {
    if (await stillExists(account, id)) problems.push(`forgot ${id} while it still existed`);
  }
  return outcome;
}

/** What must hold at the end of a phase; returns what is wrong (empty when all is right). */
async function endStateProblems(phase: Phase, cluster: AwsCluster, world: World) {
  const found = await inventory(cluster);
  const problems: string[] = [];
  const record = world.state.records.get(key);
  const live = world.kube.stored('default', 'web');
  if (phase === 'delete') {
    const left =
      found.loadBalancers.length + found.targetGroups.length + found.securityGroups.length;
    if (left > 0) problems.push(`left over: ${JSON.stringify(found)}`);
    if (live !== undefined) problems.push('the Service still exists (finalizer kept)');
    if (record !== undefined) problems.push('the state record is still there');
    return { problems, leaked: left };
  }
  const ports = phase === 'create' ? [30080, 30443] : [30080, 30843];
  const instances = cluster.hosts.map((h) => h.instanceId).sort();
  const [lb] = found.loadBalancers;
  if (found.loadBalancers.length !== 1) problems.push(`${found.loadBalancers.length} NLBs`);
  if (found.securityGroups.length !== 1) problems.push(`${found.securityGroups.length} SGs`);
  const tgPorts = found.targetGroups.map((tg) => tg.port).sort();
  if (JSON.stringify(tgPorts) !== JSON.stringify(ports))
    problems.push(`target groups on ${tgPorts.join(',')}`);
  for (const tg of found.targetGroups) {
    if (JSON.stringify(tg.targets) !== JSON.stringify(instances))
      problems.push(`targets of ${tg.port}: ${tg.targets.join(',')}`);
    if (phase === 'update' && !tg.health.endsWith('every 30s'))
      problems.push(`health check of ${tg.port}: ${tg.health}`);
  }
  const listenerTargets = new Set(lb?.listeners.map((l) => l.split('->')[1]));
  if (lb?.listeners.length !== 2 || found.targetGroups.some((tg) => !listenerTargets.has(tg.name)))
    problems.push(`listeners ${lb?.listeners.join(' ')}`);
  if (live?.status?.loadBalancer?.ingress?.[0]?.hostname !== lb?.dnsName?.toLowerCase())
    problems.push('status hostname differs from the NLB');
  if (!live?.metadata?.finalizers?.includes(upstreamFinalizer)) problems.push('no finalizer');
  const state = readNlbState(record?.provider);
  if (record?.checkpoint === undefined) problems.push('no checkpoint');
  if (state.loadBalancerArn === undefined) problems.push('state lacks the NLB ARN');
  if (state.createdAt !== undefined) problems.push('creation times left in state after success');
  return { problems, leaked: surplus(found, { loadBalancers: 1, ports: 2 }) };
}

async function runOne(
  run: Run,
): Promise<{ problems: string[]; leaked: number; outcomes: string[]; faults: string[] }> {
  const account = new MotoAccount();
  const cluster = await createAwsCluster(3, undefined, account);
  const world = inMemoryWorld({ claim });
  world.kube.nodes = cluster.hosts.map((h) => makeNode(h.name, { instanceId: h.instanceId }));
  world.kube.put(makeService({ uid: 'uid-faults' }));
  const model = new AwsFaultModel(account);
  const faulty = new NlbProvider(faultyClients(account, model), cluster.settings);
  const outcomes: string[] = [];
  const problems: string[] = [];
  if (run.phase !== 'create' && run.rightAfterCreate !== true) {
    const healthy = new NlbProvider(cluster.clients, cluster.settings);
    expect((await syncService(key, { ...world.deps, provider: healthy })).kind).toBe('done');
  }
  run.faults(model);
  if (run.phase !== 'create') {
    if (run.rightAfterCreate === true) await syncPass(world, faulty, account, outcomes, problems);
    const phase = run.phase;
    change(world, (live) => changeFor(phase, live));
  } else if (run.thenChange !== undefined) {
    await syncPass(world, faulty, account, outcomes, problems);
    change(world, run.thenChange);
  }
  const outcome = await syncUntilDone(world, faulty, account, outcomes, problems);
  if (outcome.kind !== 'done') problems.push(`not done: ${outcomes.at(-1) ?? ''}`);
  const end = await endStateProblems(run.phase, cluster, world);
  return {
    problems: [...problems, ...end.problems],
    leaked: end.leaked,
    outcomes,
    faults: model.log,
  };
}

interface Row {
  readonly scenario: ScenarioResult['scenario'];
  readonly how: string;
  /** What the fault model's log shows in every run, so no run passes without its fault. */
  readonly evidence: RegExp;
  readonly runs: readonly Run[];
}

const sgUnseen = (calls: number) => (model: AwsFaultModel) => {
  model.eventualConsistency({ after: ['CreateSecurityGroup'], calls });
};
const elbUnseen =
  (calls: number, after?: ('CreateTargetGroup' | 'CreateLoadBalancer' | 'CreateListener')[]) =>
  (model: AwsFaultModel) => {
    model
      .eventualConsistency({
        after: after ?? ['CreateTargetGroup', 'CreateLoadBalancer', 'CreateListener'],
        calls,
      })
      .answerRepeatedCreatesAsAws();
  };
/** A lost answer, with AWS's answers to repeated creates (without them moto makes a second NLB). */
const lost =
  (operation: string, times: number, as: 'server-error' | 'dropped-connection' = 'server-error') =>
  (model: AwsFaultModel) => {
    model.answerRepeatedCreatesAsAws().loseAnswers({ operation, times, as });
  };

const rows: readonly Row[] = [
  {
    scenario: 'AWS faults: security groups not visible yet',
    evidence: /InvalidGroup\.NotFound|left out sg-/,
    how: 'a new security group answers InvalidGroup.NotFound to the next calls naming it and is left out of filtered lookups (1–6 calls); create, update and delete right after the create; judged against the account inventory',
    runs: [
      { phase: 'create', label: 'unseen for 1 call', faults: sgUnseen(1) },
      { phase: 'create', label: 'unseen for 3 calls', faults: sgUnseen(3) },
      { phase: 'create', label: 'unseen for 6 calls', faults: sgUnseen(6) },
      {
        phase: 'create',
        label: 'first answer lost, the duplicate not in the name lookup yet',
        faults: (model) => {
          sgUnseen(3)(model);
          model.loseAnswers({ operation: 'CreateSecurityGroup', times: 1 });
        },
      },
      {
        phase: 'update',
        rightAfterCreate: true,
        label: 'updated, unseen for 4',
        faults: sgUnseen(4),
      },
      {
        phase: 'delete',
        rightAfterCreate: true,
        label: 'deleted, unseen for 2',
        faults: sgUnseen(2),
      },
      {
        phase: 'delete',
        rightAfterCreate: true,
        label: 'deleted, unseen for 6',
        faults: sgUnseen(6),
      },
    ],
  },
  {
    scenario: 'AWS faults: target groups, load balancers and listeners not visible yet',
    evidence: /NotFoundException|left out arn:/,
    how: 'new target groups, NLB and listeners answer TargetGroupNotFound, LoadBalancerNotFound or ListenerNotFound to the next calls naming them and are left out of lookups (1–4 calls), with AWS’s answers to repeated creates; create, update, delete right after the create',
    runs: [
      { phase: 'create', label: 'all unseen for 1 call', faults: elbUnseen(1) },
      { phase: 'create', label: 'all unseen for 2 calls', faults: elbUnseen(2) },
      { phase: 'create', label: 'all unseen for 4 calls', faults: elbUnseen(4) },
      { phase: 'create', label: 'NLB unseen for 3', faults: elbUnseen(3, ['CreateLoadBalancer']) },
      { phase: 'update', label: 'new group and listener unseen for 2', faults: elbUnseen(2) },
      { phase: 'update', label: 'new group and listener unseen for 4', faults: elbUnseen(4) },
      {
        phase: 'delete',
        rightAfterCreate: true,
        label: 'deleted, unseen for 2',
        faults: elbUnseen(2),
      },
      {
        phase: 'delete',
        rightAfterCreate: true,
        label: 'deleted, unseen for 4',
        faults: elbUnseen(4),
      },
    ],
  },
  {
    scenario: 'AWS faults: answers lost after the change was made',
    evidence: /answer lost/,
    how: 'one call takes effect in moto and its answer is lost (5xx on every SDK attempt, or a dropped connection the SDK retries), for each create, change and delete the phase makes, with AWS’s answers to repeated creates',
    runs: [
      ...['CreateSecurityGroup', 'AuthorizeSecurityGroupIngress', 'CreateTargetGroup'].map(
        (operation): Run => ({ phase: 'create', label: operation, faults: lost(operation, 3) }),
      ),
      ...['RegisterTargets', 'CreateLoadBalancer', 'CreateListener'].map((operation): Run => ({
        phase: 'create',
        label: operation,
        faults: lost(operation, 3),
      })),
      ...['CreateSecurityGroup', 'CreateTargetGroup', 'CreateLoadBalancer'].map(
        (operation): Run => ({
          phase: 'create',
          label: `${operation}, connection dropped`,
          faults: lost(operation, 1, 'dropped-connection'),
        }),
      ),
      ...['CreateTargetGroup', 'ModifyTargetGroup', 'CreateListener', 'DeleteListener'].map(
        (operation): Run => ({ phase: 'update', label: operation, faults: lost(operation, 3) }),
      ),
      ...['DeleteTargetGroup', 'RevokeSecurityGroupIngress'].map((operation): Run => ({
        phase: 'update',
        label: operation,
        faults: lost(operation, 3),
      })),
      ...['DeleteLoadBalancer', 'DeleteTargetGroup', 'DeleteSecurityGroup'].map(
        (operation): Run => ({ phase: 'delete', label: operation, faults: lost(operation, 3) }),
      ),
      {
        phase: 'delete',
        label: 'DeleteLoadBalancer, connection dropped',
        faults: lost('DeleteLoadBalancer', 1, 'dropped-connection'),
      },
    ],
  },
  {
    scenario: 'AWS faults: repeated creates answered as AWS does',
    evidence: /returned the existing|Duplicate/,
    how: 'CreateLoadBalancer, CreateTargetGroup and CreateListener repeated (an SDK retry after a lost answer, or the next pass) get the existing resource for the same settings and Duplicate… for others, as AWS answers; moto would make a second NLB and listener and refuse every repeated target group',
    runs: [
      {
        phase: 'create',
        label: 'CreateLoadBalancer retried',
        faults: lost('CreateLoadBalancer', 1),
      },
      { phase: 'create', label: 'CreateTargetGroup retried', faults: lost('CreateTargetGroup', 1) },
      { phase: 'create', label: 'CreateListener retried', faults: lost('CreateListener', 1) },
      {
        phase: 'create',
        label: 'CreateTargetGroup repeated with another health check',
        faults: lost('CreateTargetGroup', 3),
        thenChange: (live) => ({
          ...live,
          metadata: { ...live.metadata, annotations: { [healthCheckInterval]: '30' } },
        }),
      },
      {
        phase: 'create',
        label: 'CreateLoadBalancer repeated while the NLB is not listed yet',
        faults: (model) => {
          lost('CreateLoadBalancer', 3)(model);
          model.eventualConsistency({ after: ['CreateLoadBalancer'], calls: 2 });
        },
      },
      { phase: 'update', label: 'new group retried', faults: lost('CreateTargetGroup', 1) },
      {
        phase: 'delete',
        rightAfterCreate: true,
        label: 'deleted after a CreateLoadBalancer whose answer was lost',
        faults: lost('CreateLoadBalancer', 3),
      },
    ],
  },
];

describe('AWS faults against moto, through the real use case', () => {
  it.each(rows.map((row) => [row.scenario, row] as const))(
    '%s: every run converges, nothing made twice, left over or forgotten',
    async (_, row) => {
      recordPending(row.scenario, row.runs.length, row.how);
      const failures: string[] = [];
      let converged = 0;
      let leaked = 0;
      let lostRuns = 0;
      for (const run of row.runs) {
        const result = await runOne(run);
        if (!row.evidence.test(result.faults.join('\n')))
          result.problems.push(`the fault never took effect (${result.faults.join('; ')})`);
        leaked += result.leaked;
        if (result.problems.length === 0) converged++;
        else {
          if (result.leaked === 0) lostRuns++;
          failures.push(
            `${run.phase}, ${run.label}: ${result.problems.join('; ')} [${result.outcomes.join(' | ')}]`,
          );
        }
      }
      recordScenario({
        scenario: row.scenario,
        runs: row.runs.length,
        converged,
        leaked,
        lost: lostRuns,
        how: row.how,
      });
      expect(failures).toEqual([]);
    },
    300_000,
  );
});
