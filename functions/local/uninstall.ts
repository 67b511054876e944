import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { ourFinalizersOn } from '../core/claim';
import type { Service } from '../core/objects';
import { HttpKubernetesApi } from '../kube/kubernetes-api';
import type { WiredRuntime } from '../wiring/wiring';

export interface UninstallPlan {
  /** Service UID → `namespace/name`, for every Service that owns AWS resources of this cluster. */
  readonly owners: ReadonlyMap<string, string>;
  /** Services still carrying our finalizer. */
  readonly finalized: readonly string[];
}

/** What an uninstall would delete and release: resources found by the cluster tag, finalizers. */
export async function planUninstall(
  ctx: WiredRuntime,
  kubeconfigPath: string,
): Promise<UninstallPlan> {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  const api = kubeConfig.makeApiClient(CoreV1Api);
  const services = (await api.listServiceForAllNamespaces()).items as Service[];
  return {
    owners: await ctx.provider.ownersInCluster(),
    finalized: services
      .filter((s) => ourFinalizersOn(s, ctx.config).length > 0)
      .map((s) => `${s.metadata?.namespace ?? ''}/${s.metadata?.name ?? ''}`),
  };
}

/**
 * Deletes every AWS resource this controller owns in the cluster (found by tag, so nothing is
 * missed when state is gone), waiting out security groups still held by deleted NLBs, then
 * releases the finalizers so no Service is left stuck. Stop the forwarder first, or it re-creates.
 */
export async function uninstall(
  ctx: WiredRuntime,
  kubeconfigPath: string,
  report: (line: string) => void,
  options: { retryDelayMs?: number; maxRounds?: number } = {},
): Promise<void> {
  const plan = await planUninstall(ctx, kubeconfigPath);
  let pending = [...plan.owners];
  for (let round = 0; pending.length > 0; round++) {
    if (round >= (options.maxRounds ?? 60)) {
      throw new Error(
        `resources still in use after ${round} rounds: ${pending.map(([, s]) => s).join(', ')}`,
      );
    }
    const next: typeof pending = [];
    for (const [uid, key] of pending) {
      const [namespace = '', name = ''] = key.split('/');
      const record = await ctx.store.getService(key);
      const state = record?.uid === uid ? record.provider : undefined;
      const result = await ctx.provider.ensureLoadBalancerDeleted(
        { metadata: { namespace, name, uid } },
        state,
      );
      if (result.requeueAfterSeconds === undefined)
        report(`deleted the load balancer resources of ${key}`);
      else next.push([uid, key]);
    }
    pending = next;
    if (pending.length > 0) {
      report(`waiting for ${pending.length} security group(s) still held by deleted NLBs`);
      await new Promise((resolve) => setTimeout(resolve, options.retryDelayMs ?? 10_000));
    }
  }
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  const kube = HttpKubernetesApi.fromConnection(kubeConfig);
  for (const key of plan.finalized) {
    const [namespace = '', name = ''] = key.split('/');
    const live = await kube.getService(namespace, name);
    if (live === undefined) continue;
    const ours = ourFinalizersOn(live, ctx.config);
    for (const finalizer of ours) await kube.removeFinalizer(live, finalizer);
    if (ours.length > 0) report(`released the finalizer of ${key}`);
  }
}
