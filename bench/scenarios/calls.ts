/**
 * AWS calls per scenario for one Service (2 ports, 3 nodes), against moto, through the real use
 * cases and the real NLB provider. ELBv2 + EC2 calls are what DESIGN §5 budgets; tagging-API,
 * state-store and Kubernetes operations are counted beside them.
 */
import { NlbProvider } from '../../functions/aws/nlb-provider';
import type { ClaimPolicy } from '../../functions/core/claim';
import type { Service } from '../../functions/core/objects';
import { syncHosts } from '../../functions/sync/sync-hosts';
import { syncNodes } from '../../functions/sync/sync-nodes';
import { syncService } from '../../functions/sync/sync-service';
import { createAwsCluster } from '../../test/support/aws-cluster';
import { makeNode, makeService } from '../../test/support/core-objects';
import { inMemoryWorld } from '../../test/support/in-memory';
import { MotoAccount } from '../../test/support/moto';

export const scenarios = ['create', 'noop', 'ensureUnchanged', 'addNode', 'delete'] as const;
export type Scenario = (typeof scenarios)[number];

/** DESIGN §5: our goal and the two anchors, counted as ELBv2 + EC2 calls per Service. */
export const anchors: Record<
  Scenario,
  {
    readonly label: string;
    readonly goal: number;
    readonly cpa: number;
    /** aws-load-balancer-controller, approximate; `albc` is the middle of the range. */
    readonly albc: number;
    readonly albcText: string;
  }
> = {
  create: { label: 'create', goal: 12, cpa: 18, albc: 32, albcText: '~32' },
  noop: { label: 'no-op resync', goal: 0, cpa: 12, albc: 15, albcText: '~15' },
  ensureUnchanged: {
    label: 'drift check (Ensure, unchanged NLB)',
    goal: 8,
    cpa: 12,
    albc: 15,
    albcText: '~15',
  },
  // DESIGN §5 asks ≤ 1 per target group (2 here); one DescribeTags more reads the groups'
  // ownership tags before any registration, since state alone is no proof (issue 19).
  addNode: { label: 'one node added (per LB)', goal: 3, cpa: 16, albc: 3, albcText: '~3' },
  delete: { label: 'delete', goal: 8, cpa: 11, albc: 15, albcText: '12–18' },
};

export interface ScenarioCalls {
  readonly scenario: Scenario;
  /** ELBv2 + EC2 calls. */
  readonly cloud: number;
  readonly tagging: number;
  readonly state: number;
  readonly kube: number;
  readonly byOperation: Record<string, number>;
}

export async function measureCalls(endpoint: string): Promise<ScenarioCalls[]> {
  const cluster = await createAwsCluster(3, endpoint, new MotoAccount(endpoint));
  const provider = new NlbProvider(cluster.clients, cluster.settings);
  const claim: ClaimPolicy = {
    loadBalancerClass: 'serverless-service-controller.io/nlb',
    claimClassless: true,
  };
  const world = inMemoryWorld({ claim });
  const deps = { ...world.deps, provider };
  world.kube.nodes = cluster.hosts.map((h) => makeNode(h.name, { instanceId: h.instanceId }));
  const key = 'default/web';
  world.kube.put(makeService({ uid: 'uid-bench' }));

  const results: ScenarioCalls[] = [];
  async function measure(scenario: Scenario, run: () => Promise<unknown>): Promise<void> {
    cluster.recorder.reset();
    world.log.clear();
    await run();
    const byOperation = cluster.recorder.byOperation();
    const count = (service: string) =>
      Object.entries(byOperation)
        .filter(([op]) => op.startsWith(`${service}.`))
        .reduce((sum, [, n]) => sum + n, 0);
    results.push({
      scenario,
      cloud: count('ElasticLoadBalancingV2') + count('EC2'),
      tagging: count('ResourceGroupsTaggingAPI'),
      state: world.log.lines('state').length,
      kube: world.log.lines('kube').length + world.log.lines('events').length,
      byOperation,
    });
  }

  const outcome = (o: { kind: string }) => {
    if (o.kind !== 'done') throw new Error(`sync ended ${o.kind}`);
  };
  await measure('create', async () => outcome(await syncService(key, deps)));
  await measure('noop', async () => outcome(await syncService(key, deps)));
  await measure('ensureUnchanged', async () => {
    const record = world.state.records.get(key);
    await provider.ensureLoadBalancer(
      world.kube.stored('default', 'web') as Service,
      cluster.hosts,
      record?.provider,
    );
  });
  const [added] = await cluster.addHosts(1);
  if (added === undefined) throw new Error('no instance was started');
  world.kube.nodes = [...world.kube.nodes, makeNode(added.name, { instanceId: added.instanceId })];
  await syncNodes(deps);
  await measure('addNode', async () => outcome(await syncHosts(key, deps)));
  const live = world.kube.stored('default', 'web');
  if (live === undefined) throw new Error('the Service disappeared');
  world.kube.put({
    ...live,
    metadata: { ...live.metadata, deletionTimestamp: '2026-11-30T12:00:00Z' },
  });
  await measure('delete', async () => outcome(await syncService(key, deps)));
  return results;
}
