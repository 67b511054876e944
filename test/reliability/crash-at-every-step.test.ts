import { describe, expect, it } from 'vitest';
import { NlbProvider } from '../../functions/nlb/nlb-provider';
import { readNlbState } from '../../functions/nlb/nlb-state';
import { upstreamFinalizer, type ClaimPolicy } from '../../functions/core/claim';
import type { Service, ServicePort } from '../../functions/core/objects';
import type { SyncDependencies } from '../../functions/sync/dependencies';
import type { SyncOutcome } from '../../functions/sync/outcome';
import { syncService } from '../../functions/sync/sync-service';
import { syncTargets } from '../../functions/sync/sync-targets';
import { createAwsCluster, type AwsCluster } from '../../kit/aws-cluster';
import { makeNode, makeService } from '../../kit/core-objects';
import { inMemoryWorld } from '../../kit/in-memory';
import { MotoAccount } from '../../kit/moto';
import { crashingClients } from './support/crash';
import { inventory, shapeOf, surplus, type Inventory } from './support/inventory';
import { webPodSlice } from './support/world';
import { recordPending, recordScenario } from './support/summary';
import { AwsCallRecorder, type InstrumentableClient } from '../../kit/aws-calls';

const claim: ClaimPolicy = { loadBalancerClass: 'x.io/nlb', claimClassless: true };
const key = 'default/web';
const updatedPorts: ServicePort[] = [
  { name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 },
  { name: 'admin', protocol: 'TCP', port: 8443, nodePort: 30843 },
];

type Phase =
  | 'create'
  | 'update'
  | 'delete'
  | 'create with pods'
  | 'pods rolling update'
  | 'pods rolling update, then a new pod goes';

const podPhases: readonly Phase[] = [
  'create with pods',
  'pods rolling update',
  'pods rolling update, then a new pod goes',
];
const rolling = (phase: Phase) => phase.startsWith('pods rolling update');
const podPorts: ServicePort[] = [
  { name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 },
  { name: 'https', protocol: 'TCP', port: 443, targetPort: 8443 },
];
const before = ['10.0.1.5', '10.0.1.6'];
/** The rolling update: 10.0.1.5 terminating, 10.0.1.6 staying, two new pods ready. */
const after = ['10.0.1.6', '10.0.1.7', '10.0.1.8'];
/**
 * Then 10.0.1.8 goes before the next pass: a registration whose answer the crash lost must not
 * leave it behind (its IP may be another Service's pod next).
 */
const afterGone = ['10.0.1.6', '10.0.1.7'];

/** Between the pass that dies (or the clean run's pass) and the next one. */
function changeBetweenPasses(phase: Phase, world: ReturnType<typeof inMemoryWorld>): void {
  if (phase === 'pods rolling update, then a new pod goes')
    world.kube.endpointSlices.set(key, [webPodSlice(afterGone, ['10.0.1.5'])]);
}

/**
 * A fresh account and cluster with the Service at the start of `phase`: nothing yet (create),
 * created and about to get other ports and health-check settings (update), or created and being
 * deleted (delete); with pod targets, nothing yet, or created with two pods whose Deployment
 * then rolls (a targets sync). The state store and the API server are in memory; AWS is moto.
 */
async function startOf(phase: Phase) {
  const account = new MotoAccount();
  const cluster = await createAwsCluster(3, undefined, account);
  const world = inMemoryWorld({ claim });
  world.kube.nodes = cluster.hosts.map((h) => makeNode(h.name, { instanceId: h.instanceId }));
  const healthy = new NlbProvider(cluster.clients, cluster.settings);
  if (podPhases.includes(phase)) {
    world.kube.put(
      makeService({
        uid: 'uid-crash',
        ports: podPorts,
        annotations: { 'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type': 'ip' },
      }),
    );
    world.kube.endpointSlices.set(key, [webPodSlice(before)]);
    if (rolling(phase)) {
      expect((await syncService(key, { ...world.deps, provider: healthy })).kind).toBe('done');
      world.kube.endpointSlices.set(key, [webPodSlice(after, ['10.0.1.5'])]);
    }
    return { account, cluster, world, healthy };
  }
  world.kube.put(makeService({ uid: 'uid-crash' }));
  if (phase !== 'create') {
    expect((await syncService(key, { ...world.deps, provider: healthy })).kind).toBe('done');
    const live = world.kube.stored('default', 'web') as Service;
    world.kube.put(
      phase === 'update'
        ? {
            ...live,
            metadata: {
              ...live.metadata,
              annotations: {
                // Not the default (10), so the update changes the health check too.
                'service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval': '30',
              },
            },
            spec: { ...live.spec, ports: updatedPorts },
          }
        : { ...live, metadata: { ...live.metadata, deletionTimestamp: '2026-11-30T12:00:00Z' } },
    );
  }
  return { account, cluster, world, healthy };
}

/**
 * Syncs until done, as the queue would redeliver: a requeue or a retry just runs again. A
 * rolling update is a `targets` message; the pass after a crash finds the dead holder's lease
 * expired and unverified, so the runtime has it read the targets from AWS (`readTargets`).
 */
async function syncUntilDone(
  deps: SyncDependencies,
  phase: Phase,
  afterCrash: boolean,
): Promise<SyncOutcome> {
  let outcome: SyncOutcome = { kind: 'done' };
  for (let pass = 0; pass < 6; pass++) {
    outcome = rolling(phase)
      ? await syncTargets(key, deps, { readTargets: afterCrash || pass > 0 })
      : await syncService(key, deps);
    if (outcome.kind === 'done') return outcome;
  }
  return outcome;
}

/** What must hold at the end of each phase; returns what is wrong (empty when all is right). */
async function endStateProblems(
  phase: Phase,
  cluster: AwsCluster,
  world: Awaited<ReturnType<typeof startOf>>['world'],
  found: Inventory,
): Promise<string[]> {
  const problems: string[] = [];
  const record = world.state.records.get(key);
  const live = world.kube.stored('default', 'web');
  if (phase === 'delete') {
    if (found.loadBalancers.length + found.targetGroups.length + found.securityGroups.length > 0)
      problems.push(`left over: ${JSON.stringify(found)}`);
    if (live !== undefined) problems.push('the Service still exists (finalizer kept)');
    if (record !== undefined) problems.push('the state record is still there');
    if ((await cluster.ownedResources()).length > 0) problems.push('tagged resources remain');
    return problems;
  }
  const pods =
    phase === 'create with pods' ? before : phase === 'pods rolling update' ? after : afterGone;
  const ports = podPhases.includes(phase)
    ? [8080, 8443]
    : phase === 'create'
      ? [30080, 30443]
      : [30080, 30843];
  const targetsOf = (port: number) =>
    podPhases.includes(phase)
      ? pods.map((ip) => `${ip}:${port}`).sort()
      : cluster.hosts.map((h) => h.instanceId).sort();
  const [lb] = found.loadBalancers;
  if (found.loadBalancers.length !== 1) problems.push(`${found.loadBalancers.length} NLBs`);
  if (found.securityGroups.length !== 1) problems.push(`${found.securityGroups.length} SGs`);
  const tgPorts = found.targetGroups.map((tg) => tg.port).sort();
  if (JSON.stringify(tgPorts) !== JSON.stringify(ports))
    problems.push(`target groups on ${tgPorts.join(',')}`);
  for (const tg of found.targetGroups) {
    if (JSON.stringify(tg.targets) !== JSON.stringify(targetsOf(tg.port)))
      problems.push(`targets of ${tg.port}: ${tg.targets.join(',')}`);
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
  return problems;
}

describe('crash after the k-th AWS call, then run again (moto)', () => {
  it.each<Phase>([
    'create',
    'update',
    'delete',
    'create with pods',
    'pods rolling update',
    'pods rolling update, then a new pod goes',
  ])(
    '%s: converges to the same end state for every k, with nothing duplicated or left over',
    async (phase) => {
      const how = `the sync dies after AWS call k (its answer lost), for every k of a clean run${phase === 'delete' ? ' (whose security group AWS holds on the first pass, so the delete takes two)' : ''}; a fresh sync then runs; account inventory (listeners, target groups and their health checks and targets, security group rules), status, finalizer and state compared with the clean run's`;
      recordPending(`crash at every step: ${phase}`, 1, how);
      // A clean run says how many calls the phase makes; every one of them is a crash point. For
      // a delete, AWS holds the security group once (as it does for minutes after the NLB goes),
      // so the delete takes two passes and the second pass's calls are crash points too.
      const busySecurityGroup = () => {
        const recorder = new AwsCallRecorder();
        if (phase === 'delete') {
          recorder.injectFault({
            operation: 'DeleteSecurityGroup',
            kind: 'error',
            code: 'DependencyViolation',
            times: 1,
          });
        }
        return <C extends InstrumentableClient>(client: C) => recorder.attach(client);
      };
      const clean = await startOf(phase);
      const counter = crashingClients(clean.account, Number.POSITIVE_INFINITY, busySecurityGroup());
      const cleanProvider = new NlbProvider(counter.clients, clean.cluster.settings);
      expect(
        (await syncUntilDone({ ...clean.world.deps, provider: cleanProvider }, phase, false)).kind,
      ).toBe('done');
      const total = counter.calls();
      if (phase === 'pods rolling update, then a new pod goes') {
        changeBetweenPasses(phase, clean.world);
        expect(
          (await syncUntilDone({ ...clean.world.deps, provider: clean.healthy }, phase, false))
            .kind,
        ).toBe('done');
      }
      const cleanFound = await inventory(clean.cluster);
      expect(await endStateProblems(phase, clean.cluster, clean.world, cleanFound)).toEqual([]);

      const failures: string[] = [];
      let converged = 0;
      let leaked = 0;
      let lost = 0;
      const only = process.env.CRASH_K === undefined ? undefined : Number(process.env.CRASH_K);
      for (let k = only ?? 1; k <= (only ?? total); k++) {
        const run = await startOf(phase);
        const crash = crashingClients(run.account, k, busySecurityGroup());
        const dying = new NlbProvider(crash.clients, run.cluster.settings);
        const abandoned = syncUntilDone({ ...run.world.deps, provider: dying }, phase, false);
        await Promise.race([abandoned, crash.crashed]);
        changeBetweenPasses(phase, run.world);
        const outcome = await syncUntilDone(
          { ...run.world.deps, provider: run.healthy },
          phase,
          true,
        );
        const found = await inventory(run.cluster);
        const problems = await endStateProblems(phase, run.cluster, run.world, found);
        if (crash.calls() !== k) problems.push(`the sync made ${crash.calls()} calls, not k`);
        if (shapeOf(found) !== shapeOf(cleanFound))
          problems.push(`end state ${shapeOf(found)} differs from the clean run's`);
        const extra =
          phase === 'delete'
            ? found.loadBalancers.length + found.targetGroups.length + found.securityGroups.length
            : surplus(found, { loadBalancers: 1, ports: 2 });
        leaked += extra;
        if (outcome.kind === 'done' && problems.length === 0) converged++;
        else if (extra === 0) lost++;
        if (problems.length > 0 || outcome.kind !== 'done')
          failures.push(
            `k=${k}: ${outcome.kind}${'error' in outcome ? ` (${String(outcome.error)})` : ''}; ${problems.join('; ')}`,
          );
      }
      recordScenario({
        scenario: `crash at every step: ${phase}`,
        runs: total,
        converged,
        leaked,
        lost,
        how: how.replace('every k of a clean run', `k = 1..${total}`),
      });
      expect(failures).toEqual([]);
    },
    300_000,
  );
});
