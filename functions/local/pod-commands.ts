import {
  CoreV1Api,
  DiscoveryV1Api,
  KubeConfig,
  type V1EndpointSlice,
} from '@kubernetes/client-node';
import { serviceNameLabel } from '../kube/kubernetes-api';
import { UsageError } from './cli-usage';
import { explicitKubeconfig, type Flags } from './cli-options';
import { liveEmbeddedState } from './embedded-run';

// `pod add|remove|list`: simulated pods behind a Service of the embedded cluster, written as the
// EndpointSlice controller would write them (issue 36), so a Service with ip targets has pods to
// send traffic to. The embedded cluster runs no pods; only their endpoints are simulated.

/** Pod addresses start here: inside the emulator's VPC, away from the subnets' first addresses. */
const podNetwork = '10.0.200.';
const managedBy = 'endpointslice.kubernetes.io/managed-by';
/** The managed-by value of simulated slices, as each controller names its own. */
const simulated = 'serverless-service-controller-local-mode';

export async function pod(flags: Flags, args: readonly string[]): Promise<number> {
  const [action, target, argument] = args;
  const [namespace = '', service = ''] = (target ?? '').split('/');
  if (service === '')
    throw new UsageError(`pod ${action ?? ''} needs NAMESPACE/SERVICE (the Service the pods back)`);
  const kc = embeddedCluster(flags, action ?? '');
  const slices = kc.makeApiClient(DiscoveryV1Api);
  const sliceName = `${service}-simulated`;
  const current = await slices
    .readNamespacedEndpointSlice({ name: sliceName, namespace })
    .catch(() => undefined);
  const endpoints = current?.endpoints ?? [];
  if (action === 'list') {
    for (const e of endpoints)
      console.log(`pod/${namespace}/${e.targetRef?.name ?? ''} ${e.addresses[0] ?? ''}`);
    if (endpoints.length === 0) console.log(`(no simulated pods behind ${namespace}/${service})`);
    return 0;
  }
  if (action === 'add') {
    const count = Number(argument ?? '1');
    if (!Number.isInteger(count) || count < 1 || count > 250)
      throw new UsageError('pod add takes a COUNT from 1 to 250');
    const ports = await slicePorts(kc, namespace, service);
    const used = await simulatedAddresses(slices);
    const added: { name: string; ip: string }[] = [];
    for (let host = 10; host < 255 && added.length < count; host++) {
      const ip = `${podNetwork}${host}`;
      if (!used.has(ip)) added.push({ name: `${service}-${randomSuffix()}`, ip });
    }
    if (added.length < count) throw new UsageError(`no free pod address left in ${podNetwork}0/24`);
    const body: V1EndpointSlice = {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: sliceName,
        namespace,
        labels: {
          [serviceNameLabel]: service,
          [managedBy]: simulated,
        },
        ...(current?.metadata?.resourceVersion !== undefined
          ? { resourceVersion: current.metadata.resourceVersion }
          : {}),
      },
      addressType: 'IPv4',
      ports,
      endpoints: [
        ...endpoints,
        ...added.map(({ name, ip }) => ({
          addresses: [ip],
          conditions: { ready: true, serving: true, terminating: false },
          targetRef: { kind: 'Pod', namespace, name },
        })),
      ],
    };
    if (current === undefined) await slices.createNamespacedEndpointSlice({ namespace, body });
    else await slices.replaceNamespacedEndpointSlice({ name: sliceName, namespace, body });
    for (const { name, ip } of added) console.log(`pod/${namespace}/${name} added (${ip})`);
    return 0;
  }
  if (action === 'remove') {
    if (argument === undefined) throw new UsageError('pod remove needs a pod name or address');
    const kept = endpoints.filter(
      (e) => e.targetRef?.name !== argument && e.addresses[0] !== argument,
    );
    if (current === undefined || kept.length === endpoints.length)
      throw new UsageError(`no simulated pod ${argument} behind ${namespace}/${service}`);
    // Gone at once, as a pod whose grace period is over: its target is deregistered.
    await slices.replaceNamespacedEndpointSlice({
      name: sliceName,
      namespace,
      body: { ...current, endpoints: kept },
    });
    console.log(`pod/${namespace}/${argument} removed`);
    return 0;
  }
  throw new UsageError(`unknown pod action ${action ?? ''}`);
}

/** The embedded cluster's kubeconfig: simulated pods never go into another cluster. */
function embeddedCluster(flags: Flags, action: string): KubeConfig {
  const state = liveEmbeddedState();
  if (state === undefined) throw new UsageError(`pod ${action} works on the embedded cluster only`);
  const given = explicitKubeconfig(flags);
  if (given !== undefined && given !== state.kubeconfig) {
    throw new UsageError(
      `pod ${action} simulates pods in the embedded cluster only (${state.kubeconfig}), not in --kubeconfig ${given}`,
    );
  }
  const kc = new KubeConfig();
  kc.loadFromFile(state.kubeconfig);
  return kc;
}

/**
 * The slice's ports, as the EndpointSlice controller derives them from the Service: each port's
 * name and protocol, on its targetPort (a named targetPort has no container to resolve it here:
 * the Service port's number stands in).
 */
async function slicePorts(kc: KubeConfig, namespace: string, service: string) {
  const found = await kc
    .makeApiClient(CoreV1Api)
    .readNamespacedService({ name: service, namespace })
    .catch(() => undefined);
  if (found === undefined) throw new UsageError(`service ${namespace}/${service} not found`);
  return (found.spec?.ports ?? []).map((p) => ({
    name: p.name ?? '',
    protocol: p.protocol ?? 'TCP',
    port: typeof p.targetPort === 'number' ? p.targetPort : p.port,
  }));
}

/** The addresses simulated pods of every Service hold: two pods never share one. */
async function simulatedAddresses(slices: DiscoveryV1Api): Promise<Set<string>> {
  const all = await slices.listEndpointSliceForAllNamespaces({
    labelSelector: `${managedBy}=${simulated}`,
  });
  return new Set(all.items.flatMap((s) => (s.endpoints ?? []).map((e) => e.addresses[0] ?? '')));
}

function randomSuffix(): string {
  return Math.random().toString(36).slice(2, 7);
}
