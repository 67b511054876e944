import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { KubeConnection } from '../forwarder/in-cluster';

/** How to reach and authenticate to one API server, as a kubeconfig or EKS describes it. */
export interface ClusterAccess {
  readonly server: string;
  /** PEM of the cluster CA; without it, the system's trust store. */
  readonly ca?: string | undefined;
  readonly cert?: string | undefined;
  readonly key?: string | undefined;
  readonly insecureSkipTlsVerify?: boolean | undefined;
  /** The bearer token of each request, asked for every time so a rotated one is picked up. */
  readonly token?: (() => string | undefined | Promise<string | undefined>) | undefined;
}

/**
 * A KubeConnection from plain settings, with one keep-alive agent for its TLS material: a warm
 * Lambda reuses the API server connection across invocations instead of a new TLS handshake.
 */
export class ClusterConnection implements KubeConnection {
  private readonly agent: http.Agent;

  constructor(private readonly access: ClusterAccess) {
    // Plain HTTP only for local API servers (the fake one, kubectl proxy): no TLS to configure.
    this.agent = access.server.startsWith('http:')
      ? new http.Agent({ keepAlive: true })
      : new https.Agent({
          keepAlive: true,
          ...(access.ca !== undefined ? { ca: access.ca } : {}),
          ...(access.cert !== undefined ? { cert: access.cert } : {}),
          ...(access.key !== undefined ? { key: access.key } : {}),
          ...(access.insecureSkipTlsVerify ? { rejectUnauthorized: false } : {}),
        });
  }

  getCurrentCluster(): { readonly server: string } {
    return { server: this.access.server };
  }

  async applyToHTTPSOptions(options: https.RequestOptions): Promise<void> {
    const token = await this.access.token?.();
    options.agent = this.agent;
    if (this.access.ca !== undefined) options.ca = this.access.ca;
    if (this.access.cert !== undefined) options.cert = this.access.cert;
    if (this.access.key !== undefined) options.key = this.access.key;
    if (this.access.insecureSkipTlsVerify) options.rejectUnauthorized = false;
    if (token !== undefined) {
      options.headers = { ...options.headers, Authorization: `Bearer ${token}` };
    }
  }
}

/** A token file read on each request: projected ServiceAccount tokens are rewritten as they expire. */
export function tokenFromFile(path: string): () => string {
  return () => readFileSync(path, 'utf8').trim();
}
