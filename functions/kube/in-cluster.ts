import { readFileSync } from 'node:fs';
import https from 'node:https';

/**
 * What the forwarder needs of a cluster connection: the API server's address, and the TLS and
 * authentication settings of each request. client-node's KubeConfig has this shape (local mode and
 * tests pass one); in the cluster, `InClusterConnection` provides it without client-node, which
 * would otherwise be most of the forwarder's bundle.
 */
export interface KubeConnection {
  getCurrentCluster(): { readonly server: string } | null;
  applyToHTTPSOptions(options: https.RequestOptions): Promise<void>;
}

/** Where Kubernetes mounts a Pod's ServiceAccount token and the cluster CA. */
export const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * The Pod's own ServiceAccount, as Kubernetes documents in-cluster access ("Accessing the
 * Kubernetes API from a Pod"): the API server at KUBERNETES_SERVICE_HOST:PORT over HTTPS, trusted
 * through the mounted CA, authenticated with the mounted token. The token is read again for every
 * request: projected tokens expire (an hour by default) and the kubelet rewrites the file.
 */
export class InClusterConnection implements KubeConnection {
  private readonly server: string;
  private agent: { readonly ca: string; readonly agent: https.Agent } | undefined;

  constructor(
    env: Readonly<Record<string, string | undefined>>,
    private readonly dir = env.KUBERNETES_SERVICE_ACCOUNT_DIR ?? serviceAccountDir,
  ) {
    const host = env.KUBERNETES_SERVICE_HOST;
    const port = env.KUBERNETES_SERVICE_PORT;
    if (!host || !port) {
      throw new Error(
        'not in a Kubernetes Pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set ' +
          '(the forwarder runs in the cluster; for a run outside it use `npm start -- --kubeconfig …`)',
      );
    }
    this.server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  getCurrentCluster(): { readonly server: string } {
    return { server: this.server };
  }

  // Async to match KubeConfig's signature; the files are tiny and local.
  // eslint-disable-next-line @typescript-eslint/require-await
  async applyToHTTPSOptions(options: https.RequestOptions): Promise<void> {
    const token = readFileSync(`${this.dir}/token`, 'utf8').trim();
    const ca = readFileSync(`${this.dir}/ca.crt`, 'utf8');
    if (this.agent?.ca !== ca) {
      this.agent?.agent.destroy();
      this.agent = { ca, agent: new https.Agent({ ca, keepAlive: true }) };
    }
    options.ca = ca;
    options.agent = this.agent.agent;
    options.headers = { ...options.headers, Authorization: `Bearer ${token}` };
  }
}
