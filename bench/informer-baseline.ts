/**
 * The baseline of `npm run bench:forwarder`: what a watcher built on client-node's informers costs,
 * keeping every Service and Node whole in their caches. Prints `synced` when both lists are in.
 */
import { CoreV1Api, KubeConfig, makeInformer } from '@kubernetes/client-node';

const kc = new KubeConfig();
kc.loadFromDefault();
const api = kc.makeApiClient(CoreV1Api);
const services = makeInformer(kc, '/api/v1/services', () => api.listServiceForAllNamespaces());
const nodes = makeInformer(kc, '/api/v1/nodes', () => api.listNode());
let connected = 0;
for (const informer of [services, nodes]) {
  informer.on('error', (error) => console.error('informer error', error));
  await informer.start();
  connected++;
}
if (connected === 2)
  console.log(`synced ${services.list().length} services ${nodes.list().length} nodes`);
setInterval(() => undefined, 60_000);
