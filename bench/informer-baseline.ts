/**
 * The baseline of `npm run bench:forwarder`: what a watcher built on client-node's informers costs,
 * keeping every Service, Node and EndpointSlice whole in their caches. Prints `synced` when the
 * three lists are in.
 */
import { CoreV1Api, DiscoveryV1Api, KubeConfig, makeInformer } from '@kubernetes/client-node';

const kc = new KubeConfig();
kc.loadFromDefault();
const api = kc.makeApiClient(CoreV1Api);
const discovery = kc.makeApiClient(DiscoveryV1Api);
const services = makeInformer(kc, '/api/v1/services', () => api.listServiceForAllNamespaces());
const nodes = makeInformer(kc, '/api/v1/nodes', () => api.listNode());
const slices = makeInformer(kc, '/apis/discovery.k8s.io/v1/endpointslices', () =>
  discovery.listEndpointSliceForAllNamespaces(),
);
let connected = 0;
const informers = [services, nodes, slices] as const;
for (const informer of informers) {
  informer.on('error', (error) => console.error('informer error', error));
  await informer.start();
  connected++;
}
if (connected === informers.length)
  console.log(
    `synced ${services.list().length} services ${nodes.list().length} nodes ${slices.list().length} endpointslices`,
  );
setInterval(() => undefined, 60_000);
