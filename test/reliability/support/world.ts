import type { V1Service } from '@kubernetes/client-node';
import { readNlbState } from '../../../functions/nlb/nlb-state';
import { loadBalancerService } from '../../support/kube-objects';
import type { RuntimeWorld } from '../../support/runtime-world';
import { inventory } from './inventory';

/**
 * Handles batches until the queue holds nothing at all (visible, in flight or delayed), as the
 * event source mapping would, or the time is up. Messages in backoff count as in flight, so this
 * waits them out.
 */
export async function drainAll(world: RuntimeWorld, timeoutMs = 120_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    await world.handleOnce(1);
    const depth = await world.queueDepth();
    if (depth.visible + depth.inFlight + depth.delayed === 0) return true;
  }
  return false;
}

export async function createLoadBalancerServices(
  world: RuntimeWorld,
  names: readonly string[],
  change: (service: V1Service) => V1Service = (s) => s,
): Promise<void> {
  for (const name of names) {
    await world.api.createNamespacedService({
      namespace: 'default',
      body: change(loadBalancerService(name)),
    });
    await world.send({ v: 1, kind: 'service', key: `default/${name}` });
  }
}

/**
 * What is wrong with each Service's NLB, against the account itself: one NLB per live Service
 * with a listener per port, each on a target group holding every node; nothing else in the
 * account. `ports` maps a Service name to its ports; Services not named must have nothing.
 * `targets` is the node instances every group must hold, or, for pod targets, what the group on
 * a target-group port must hold (`ip:port`).
 */
export async function endStateProblems(
  world: RuntimeWorld,
  ports: Readonly<Record<string, readonly number[]>>,
  targets:
    readonly string[] | ((targetGroupPort: number) => readonly string[]) = world.aws.hosts.map(
    (h) => h.instanceId,
  ),
): Promise<{ problems: string[]; converged: number; leaked: number }> {
  const found = await inventory(world.aws);
  const problems: string[] = [];
  let converged = 0;
  const wantedTargets = (port: number) =>
    [...(typeof targets === 'function' ? targets(port) : targets)].sort();
  const owned = new Set<string>();
  for (const [name, wanted] of Object.entries(ports)) {
    const record = await world.runtime.store.getService(`default/${name}`);
    const state = readNlbState(record?.provider);
    const lb = found.loadBalancers.find((l) => l.dnsName === state.dnsName);
    const groups = Object.values(state.targetGroups ?? {});
    const mine: string[] = [];
    if (lb === undefined) mine.push('no NLB');
    else owned.add(lb.dnsName);
    for (const tg of groups) owned.add(tg.arn);
    if (state.securityGroupId) owned.add(state.securityGroupId);
    const listenerPorts = (lb?.listeners ?? []).map((l) => Number(/:(\d+)->/.exec(l)?.[1])).sort();
    if (JSON.stringify(listenerPorts) !== JSON.stringify([...wanted].sort()))
      mine.push(`listeners on ${listenerPorts.join(',')}`);
    for (const tg of found.targetGroups.filter((t) => groups.some((g) => g.arn === t.name))) {
      if (JSON.stringify(tg.targets) !== JSON.stringify(wantedTargets(tg.port)))
        mine.push(`targets ${tg.targets.join(',')}`);
    }
    if (record?.checkpoint === undefined) mine.push('no checkpoint');
    if (mine.length === 0) converged++;
    else problems.push(`${name}: ${mine.join('; ')}`);
  }
  const leftovers = [
    ...found.loadBalancers.filter((l) => !owned.has(l.dnsName)).map((l) => l.name),
    ...found.targetGroups.filter((t) => !owned.has(t.name)).map((t) => t.name),
    ...found.securityGroups.filter((id) => !owned.has(id)),
  ];
  if (leftovers.length > 0) problems.push(`not owned by any live Service: ${leftovers.join(', ')}`);
  return { problems, converged, leaked: leftovers.length };
}

/**
 * The EndpointSlice of Service `web`, as the EndpointSlice controller writes it: its ready pods and
 * its terminating ones on 8080 (http) and 8443 (https). Stored in the fake API server as it is,
 * and read by the in-memory Kubernetes API as the sync reads it.
 */
export function webPodSlice(ready: readonly string[], terminating: readonly string[] = []) {
  const endpoint = (ip: string, serving: boolean) => ({
    addresses: [ip],
    conditions: { ready: serving, serving, terminating: !serving },
    targetRef: { kind: 'Pod', name: `web-${ip.split('.').pop() ?? ''}` },
  });
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: 'web-abcde',
      namespace: 'default',
      labels: { 'kubernetes.io/service-name': 'web' },
    },
    addressType: 'IPv4',
    ports: [
      { name: 'http', port: 8080, protocol: 'TCP' },
      { name: 'https', port: 8443, protocol: 'TCP' },
    ],
    endpoints: [
      ...terminating.map((ip) => endpoint(ip, false)),
      ...ready.map((ip) => endpoint(ip, true)),
    ],
  };
}
