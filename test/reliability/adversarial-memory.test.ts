import { afterEach, expect, it } from 'vitest';
import { HttpKubernetesApi, servicePageSize } from '../../functions/kube/kubernetes-api';
import { loadBalancerService } from '../support/kube-objects';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { recordPending, recordScenario } from './support/summary';
import { createLoadBalancerServices, drainAll, endStateProblems } from './support/world';

let world: RuntimeWorld;

afterEach(async () => {
  await world.stop();
});

const scenario = 'adversarial: huge Services in one namespace';
/** ClusterIP Services the attacker fills, and how much each holds. */
const huge = 120;
const bytesEach = 40_000;

it('huge Services in one namespace: the functions list them in small pages, keep summaries only, and a Service in another namespace converges', async () => {
  recordPending(
    scenario,
    2,
    `${huge} ClusterIP Services of ${bytesEach / 1000} KB in one namespace beside its LoadBalancer Service, counted by the tenant policy, and a Service in another namespace`,
  );
  world = await createRuntimeWorld({
    // A maximum makes each new LoadBalancer Service list its namespace's Services.
    tenantPolicy: {
      rules: [{ name: 'attacker', namespaces: ['attacker'], maxLoadBalancerServices: 2 }],
      default: { maxLoadBalancerServices: 10 },
    },
    backoffBaseSeconds: 1,
    backoffMaxSeconds: 4,
  });
  const filler = 'x'.repeat(bytesEach);
  for (let i = 0; i < huge; i++) {
    world.kube.store.create('services', 'attacker', {
      metadata: {
        name: `huge-${i}`,
        namespace: 'attacker',
        annotations: { 'example.com/filler': filler },
      },
      spec: {
        type: 'ClusterIP',
        ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
      },
    });
  }
  await world.api.createNamespacedService({
    namespace: 'attacker',
    body: loadBalancerService('lb', 'attacker'),
  });
  await world.send({ v: 1, kind: 'service', key: 'attacker/lb' });
  await createLoadBalancerServices(world, ['good']);
  const drained = await drainAll(world);

  const problems: string[] = [];
  // Every list of the attacker's namespace asked for small pages and followed them to the end.
  const lists = world.kube.requests.filter(
    (r) => r.method === 'GET' && r.path === '/api/v1/namespaces/attacker/services',
  );
  const pagesPerList = Math.ceil((huge + 1) / servicePageSize);
  if (lists.length === 0) problems.push("the attacker's namespace was never listed");
  if (lists.length % pagesPerList !== 0)
    problems.push(`${lists.length} list pages, not whole lists of ${pagesPerList} pages`);
  const limits = new Set(lists.map((r) => r.query.get('limit')));
  if (limits.size !== 1 || !limits.has(String(servicePageSize)))
    problems.push(`list pages asked for limit ${[...limits].join(', ')}`);

  // What such a list keeps of the attacker's Services: summaries, never their annotations.
  const kept = await HttpKubernetesApi.fromConnection(world.kube.kubeConfig()).listServices(
    'attacker',
  );
  const keptBytes = JSON.stringify(kept).length;
  if (kept.length !== huge + 1) problems.push(`listed ${kept.length} Services, not ${huge + 1}`);
  if (keptBytes > (huge + 1) * 1_000)
    problems.push(`a list keeps ${keptBytes} bytes for ${huge + 1} Services`);
  const owners = new Set(
    (await world.aws.ownedResources()).map((line) => /\((.*)\)$/.exec(line)?.[1] ?? line),
  );
  const attackerConverged =
    owners.has('attacker/lb') &&
    (await world.runtime.store.getService('attacker/lb'))?.checkpoint !== undefined;
  if (!attackerConverged) problems.push("the attacker's own LoadBalancer Service did not converge");
  const extra = [...owners].filter((key) => key !== 'attacker/lb' && key !== 'default/good');
  if (extra.length > 0) problems.push(`unexpected owners of AWS resources: ${extra.join(', ')}`);
  const end = await endStateProblems(world, { good: [80, 443] });
  // The end-state check knows the default namespace only: the attacker's NLB is checked above.
  const notGood = end.problems.filter((p) => !p.startsWith('not owned by any live Service'));
  const converged = end.converged + (attackerConverged ? 1 : 0);
  recordScenario({
    scenario,
    runs: 2,
    converged,
    leaked: extra.length,
    lost: 2 - converged,
    how: `${huge} ClusterIP Services of ${bytesEach / 1000} KB of annotation each (${((huge * bytesEach) / 2 ** 20).toFixed(1)} MiB) in the attacker's namespace, whose LoadBalancer Service the tenant policy counts (maxLoadBalancerServices): every list asks for pages of ${servicePageSize}, read one item at a time and kept as summaries (the integration tests check what is kept; npm run bench:functions-memory measures 300 of 1 MB); the attacker's own Service and one in another namespace converge`,
  });
  expect(drained).toBe(true);
  expect(problems).toEqual([]);
  expect(notGood).toEqual([]);
  expect(end.converged).toBe(1);
});
