import { describe, expect, it } from 'vitest';
import { NlbProvider } from '../../functions/aws/nlb-provider';
import { readNlbState } from '../../functions/aws/nlb-state';
import { upstreamFinalizer, type ClaimPolicy } from '../../functions/core/claim';
import type { Service, ServicePort } from '../../functions/core/objects';
import type { SyncDependencies } from '../../functions/sync/dependencies';
import type { SyncOutcome } from '../../functions/sync/outcome';
import { syncService } from '../../functions/sync/sync-service';
import { createAwsCluster, type AwsCluster } from '../support/aws-cluster';
import { makeNode, makeService } from '../support/core-objects';
import { inMemoryWorld } from '../support/in-memory';
import { MotoAccount } from '../support/moto';
import { crashingClients } from './support/crash';
import { inventory, surplus, type Inventory } from './support/inventory';
import { recordScenario } from './support/summary';

const claim: ClaimPolicy = { loadBalancerClass: 'x.io/nlb', claimClassless: true };
const key = 'default/web';
const updatedPorts: ServicePort[] = [
  { name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 },
  { name: 'admin', protocol: 'TCP', port: 8443, nodePort: 30843 },
];

type Phase = 'create' | 'update' | 'delete';

/**
 * A fresh account and cluster with the Service at the start of `phase`: nothing yet (create),
 * created and about to get other ports and health-check settings (update), or created and being
 * deleted (delete). The state store and the API server are in memory; AWS is moto.
 */
async function startOf(phase: Phase) {
  const account = new MotoAccount();
  const cluster = await createAwsCluster(3, undefined, account);
  const world = inMemoryWorld({ claim });
  world.kube.nodes = cluster.hosts.map((h) => makeNode(h.name, { instanceId: h.instanceId }));
  world.kube.put(makeService({ uid: 'uid-crash' }));
  const healthy = new NlbProvider(cluster.clients, cluster.settings);
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
                'service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval': '10',
              },
            },
            spec: { ...live.spec, ports: updatedPorts },
          }
        : { ...live, metadata: { ...live.metadata, deletionTimestamp: '2026-11-30T12:00:00Z' } },
    );
  }
  return { account, cluster, world, healthy };
}

/** Syncs until done, as the queue would redeliver: a requeue or a retry just runs again. */
async function syncUntilDone(deps: SyncDependencies): Promise<SyncOutcome> {
  let outcome: SyncOutcome = { kind: 'done' };
  for (let pass = 0; pass < 6; pass++) {
    outcome = await syncService(key, deps);
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
  it.each<Phase>(['create', 'update', 'delete'])(
    '%s: converges to the same end state for every k, with nothing duplicated or left over',
    async (phase) => {
      // A clean run says how many calls the phase makes; every one of them is a crash point.
      const clean = await startOf(phase);
      const counter = crashingClients(clean.account, Number.POSITIVE_INFINITY);
      const cleanProvider = new NlbProvider(counter.clients, clean.cluster.settings);
      expect((await syncUntilDone({ ...clean.world.deps, provider: cleanProvider })).kind).toBe(
        'done',
      );
      const total = counter.calls();
      expect(
        await endStateProblems(phase, clean.cluster, clean.world, await inventory(clean.cluster)),
      ).toEqual([]);

      const failures: string[] = [];
      let converged = 0;
      let leaked = 0;
      let lost = 0;
      const only = process.env.CRASH_K === undefined ? undefined : Number(process.env.CRASH_K);
      for (let k = only ?? 1; k <= (only ?? total); k++) {
        const run = await startOf(phase);
        const crash = crashingClients(run.account, k);
        const dying = new NlbProvider(crash.clients, run.cluster.settings);
        const abandoned = syncService(key, { ...run.world.deps, provider: dying });
        await Promise.race([abandoned, crash.crashed]);
        const outcome = await syncUntilDone({ ...run.world.deps, provider: run.healthy });
        const found = await inventory(run.cluster);
        const problems = await endStateProblems(phase, run.cluster, run.world, found);
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
        how: `the sync dies after AWS call k (its answer lost), k = 1..${total}; a fresh sync then runs; account inventory, status, finalizer and state checked`,
      });
      expect(failures).toEqual([]);
    },
    300_000,
  );
});
