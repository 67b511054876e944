/**
 * The functions' side of bench/scenarios/functions-memory.ts, in a process of its own so its peak
 * RSS is the list's alone: lists the tenant namespace's Services from the fake API server named
 * by KUBECONFIG_TEXT, as the tenant policy's count does (`summaries`, the current code) or as it
 * did before issue 32 (`whole-pages`: 500-item pages read whole and parsed at once, every object
 * kept), and prints what it measured as one JSON line.
 */
import { ClusterConnection } from '../../functions/kube/cluster-connection';
import { KubeApiClient } from '../../functions/kube/kube-api-client';
import { kubeconfigAccess } from '../../functions/kube/kubeconfig';
import { HttpKubernetesApi } from '../../functions/kube/kubernetes-api';

const mode = process.argv[2] === 'whole-pages' ? 'whole-pages' : 'summaries';
const namespace = process.argv[3] ?? 'tenant';
const client = new KubeApiClient(
  new ClusterConnection(kubeconfigAccess(process.env.KUBECONFIG_TEXT ?? '')),
);
const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;
const baselineRssMiB = mib(process.memoryUsage().rss);

async function wholePages(): Promise<unknown[]> {
  const items: unknown[] = [];
  let token: string | undefined;
  do {
    const page = await client.request<{ items?: unknown[]; metadata?: { continue?: string } }>({
      method: 'GET',
      path: `/api/v1/namespaces/${namespace}/services`,
      query: { limit: 500, continue: token },
    });
    items.push(...(page.items ?? []));
    token = page.metadata?.continue || undefined;
  } while (token !== undefined);
  return items;
}

const peaks = { heapUsed: 0, external: 0 };
const sampler = setInterval(() => {
  const now = process.memoryUsage();
  peaks.heapUsed = Math.max(peaks.heapUsed, now.heapUsed);
  peaks.external = Math.max(peaks.external, now.external);
}, 10);
const started = Date.now();
const kept =
  mode === 'whole-pages'
    ? await wholePages()
    : await new HttpKubernetesApi(() => Promise.resolve(client)).listServices(namespace);
const seconds = (Date.now() - started) / 1000;
clearInterval(sampler);
console.log(
  JSON.stringify({
    mode,
    services: kept.length,
    keptBytes: JSON.stringify(kept).length,
    baselineRssMiB,
    peakRssMiB: mib(process.resourceUsage().maxRSS * 1024),
    sampledPeakHeapUsedMiB: mib(peaks.heapUsed),
    sampledPeakExternalMiB: mib(peaks.external),
    seconds,
  }),
);
client.close();
