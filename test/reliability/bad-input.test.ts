import type { V1Service, V1ServicePort } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';
import { recordPending, recordScenario } from './support/summary';
import { createLoadBalancerServices, drainAll, endStateProblems } from './support/world';

let world: RuntimeWorld;

afterEach(async () => {
  await world.stop();
});

const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;
const withAnnotations =
  (annotations: Record<string, string>) =>
  (s: V1Service): V1Service => ({ ...s, metadata: { ...s.metadata, annotations } });
const withSpec =
  (spec: Partial<NonNullable<V1Service['spec']>>) =>
  (s: V1Service): V1Service => ({ ...s, spec: { ...s.spec, ...spec } });
const ports = (count: number): V1ServicePort[] =>
  Array.from({ length: count }, (_, i) => ({
    name: `p${i}`,
    protocol: 'TCP',
    port: 1000 + i,
    targetPort: 1000 + i,
  }));

/**
 * Bad Services: each must get a Warning that says what is wrong (the `says` pattern), and nothing
 * in AWS. The fake API server lets them all in; a real one rejects some earlier, which is fine.
 */
const badServices: Record<string, { change: (s: V1Service) => V1Service; says: RegExp }> = {
  'bad-annotation': {
    change: withAnnotations({ [aws('scheme')]: 'sideways' }),
    says: /aws-load-balancer-scheme/,
  },
  'bad-cidr': {
    change: withSpec({ loadBalancerSourceRanges: ['10.0.0.0/33'] }),
    says: /10\.0\.0\.0\/33/,
  },
  'bad-legacy-cidr': {
    change: withAnnotations({
      'service.beta.kubernetes.io/load-balancer-source-ranges': 'not-a-cidr',
    }),
    says: /not-a-cidr/,
  },
  'bad-health-port': {
    change: withAnnotations({ [aws('healthcheck-port')]: '70000' }),
    says: /healthcheck-port/,
  },
  'sctp-port': {
    change: withSpec({ ports: [{ name: 'sig', protocol: 'SCTP', port: 9000, targetPort: 9000 }] }),
    says: /TCP and UDP only/,
  },
  'too-many-listeners': { change: withSpec({ ports: ports(51) }), says: /51 listeners exceed/ },
  'too-many-ranges': {
    change: withSpec({
      loadBalancerSourceRanges: Array.from({ length: 31 }, (_, i) => `10.${i}.0.0/16`),
    }),
    says: /security group rules/,
  },
  'conflicting-protocols': {
    change: withSpec({
      ports: [
        { name: 'dns-tcp', protocol: 'TCP', port: 53, targetPort: 53, nodePort: 30053 },
        { name: 'dns-udp', protocol: 'UDP', port: 53, targetPort: 53, nodePort: 30054 },
      ],
    }),
    says: /same nodePort/,
  },
  'tls-on-udp': {
    change: (s) =>
      withAnnotations({
        [aws('ssl-cert')]: 'arn:aws:acm:us-east-1:123456789012:certificate/abc',
        [aws('ssl-ports')]: 'dns',
      })(withSpec({ ports: [{ name: 'dns', protocol: 'UDP', port: 53, targetPort: 53 }] })(s)),
    says: /TLS listeners need TCP ports/,
  },
  'load-balancer-ip': {
    change: withSpec({ loadBalancerIP: '10.0.0.5' }),
    says: /spec\.loadBalancerIP/,
  },
};

/** Messages that are not the controller's: each must land in the DLQ saying why. */
const badMessages: Record<string, { body: string; says: RegExp }> = {
  'not JSON': { body: '{"v":1,', says: /not JSON/ },
  'unknown kind': {
    body: JSON.stringify({ v: 1, kind: 'mystery', key: 'default/x' }),
    says: /kind/,
  },
  oversize: {
    body: JSON.stringify({ v: 1, kind: 'service', key: 'default/x', reason: 'x'.repeat(17_000) }),
    says: /larger than 4096 bytes/,
  },
  'bad key': { body: JSON.stringify({ v: 1, kind: 'service', key: 'Not A/Key' }), says: /key/ },
  'invalid queued event': {
    body: JSON.stringify({
      v: 1,
      kind: 'event',
      event: { detailType: 'LoadBalancerDeleted', detail: { schemaVersion: 1 } },
    }),
    // The queue names stored events by id; an event itself on the queue is not ours.
    says: /event|id/,
  },
};

it('bad input catalogue: each bad Service gets a Warning saying why and nothing in AWS, each bad message lands in the DLQ saying why, and the good Services sync', async () => {
  recordPending(
    'bad input catalogue',
    Object.keys(badServices).length + Object.keys(badMessages).length + 2,
    'invalid Services, foreign messages and 2 good Services',
  );
  world = await createRuntimeWorld({ backoffBaseSeconds: 1, backoffMaxSeconds: 4 });
  // A name as long as Kubernetes allows: AWS names are 32 characters, so ours are hashed.
  const longName = `long-${'n'.repeat(58)}`;
  for (const [name, { change }] of Object.entries(badServices)) {
    await createLoadBalancerServices(world, [name], change);
  }
  for (const { body } of Object.values(badMessages)) await world.send(body);
  await createLoadBalancerServices(world, ['good', longName]);
  const drained = await drainAll(world);

  const events = await world.api.listNamespacedEvent({ namespace: 'default' });
  const problems: string[] = [];
  let answered = 0;
  for (const [name, { says }] of Object.entries(badServices)) {
    const warning = events.items.find(
      (e) =>
        e.involvedObject.name === name &&
        e.type === 'Warning' &&
        e.reason === 'SyncLoadBalancerFailed' &&
        says.test(e.message ?? ''),
    );
    if (warning === undefined) problems.push(`${name}: no Warning matching ${String(says)}`);
    else answered++;
  }
  const parked = await world.deadLetters();
  for (const [what, { body, says }] of Object.entries(badMessages)) {
    const found = parked.find((m) => m.body === body);
    if (found === undefined || !says.test(found.problem ?? ''))
      problems.push(`${what}: not in the DLQ with a problem matching ${String(says)}`);
    else answered++;
  }
  const end = await endStateProblems(world, { good: [80, 443], [longName]: [80, 443] });
  const runs = Object.keys(badServices).length + Object.keys(badMessages).length + 2;
  recordScenario({
    scenario: 'bad input catalogue',
    runs,
    converged: answered + end.converged,
    leaked: end.leaked,
    lost: runs - answered - end.converged,
    how: `${Object.keys(badServices).length} invalid Services (annotation, CIDRs, health-check port, SCTP port, 51 listeners, too many ranges, TCP/UDP nodePort conflict, TLS on UDP, loadBalancerIP), ${Object.keys(badMessages).length} foreign messages, and 2 good Services (one with a 63-character name)`,
  });
  expect(drained).toBe(true);
  expect(problems).toEqual([]);
  expect(end.problems).toEqual([]);
  expect(world.metrics.get('MalformedMessages')).toBe(Object.keys(badMessages).length);
});
