/**
 * `npm run bench:calls`: AWS calls per scenario for one Service (2 ports, 3 nodes), against moto,
 * through the real use cases and the real NLB provider. ELBv2 + EC2 calls are what DESIGN §5
 * budgets; tagging-API and state-store operations are shown beside them. Prints a table and a
 * JSON line.
 */
import { NlbProvider } from '../functions/aws/nlb-provider';
import type { ClaimPolicy } from '../functions/core/claim';
import type { Service } from '../functions/core/objects';
import { syncHosts } from '../functions/sync/sync-hosts';
import { syncNodes } from '../functions/sync/sync-nodes';
import { syncService } from '../functions/sync/sync-service';
import { createAwsCluster } from '../test/support/aws-cluster';
import { makeNode, makeService } from '../test/support/core-objects';
import { inMemoryWorld } from '../test/support/in-memory';
import { startMotoServer } from '../functions/local/moto-server';

const budgets = { create: 12, noop: 0, ensureUnchanged: 8, addNode: 2, delete: 8 } as const;
type Scenario = keyof typeof budgets;

const moto = await startMotoServer();
try {
  const cluster = await createAwsCluster(3, moto.endpoint);
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

  const results = {} as Record<
    Scenario,
    { cloud: number; tagging: number; state: number; byOperation: Record<string, number> }
  >;
  async function measure(scenario: Scenario, run: () => Promise<unknown>): Promise<void> {
    cluster.recorder.reset();
    world.log.clear();
    await run();
    const byOperation = cluster.recorder.byOperation();
    const count = (service: string) =>
      Object.entries(byOperation)
        .filter(([op]) => op.startsWith(`${service}.`))
        .reduce((sum, [, n]) => sum + n, 0);
    results[scenario] = {
      cloud: count('ElasticLoadBalancingV2') + count('EC2'),
      tagging: count('ResourceGroupsTaggingAPI'),
      state: world.log.lines('state').length,
      byOperation,
    };
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
  world.kube.nodes = [
    ...world.kube.nodes,
    makeNode(added!.name, { instanceId: added!.instanceId }),
  ];
  await syncNodes(deps);
  await measure('addNode', async () => outcome(await syncHosts(key, deps)));
  const live = world.kube.stored('default', 'web')!;
  world.kube.put({
    ...live,
    metadata: { ...live.metadata, deletionTimestamp: '2026-11-30T12:00:00Z' },
  });
  await measure('delete', async () => outcome(await syncService(key, deps)));

  const rows = Object.entries(results).map(([scenario, r]) => ({
    scenario,
    'ELBv2+EC2': r.cloud,
    budget: budgets[scenario as Scenario],
    within: r.cloud <= budgets[scenario as Scenario] ? 'yes' : 'NO',
    'tagging API': r.tagging,
    'state ops': r.state,
    calls: Object.entries(r.byOperation)
      .map(([op, n]) => `${op.split('.')[1]}×${n}`)
      .join(' '),
  }));
  console.table(rows);
  console.log(
    JSON.stringify(Object.fromEntries(Object.entries(results).map(([s, r]) => [s, r.cloud]))),
  );
  if (rows.some((row) => row.within !== 'yes')) process.exitCode = 1;
} finally {
  await moto.stop();
}
