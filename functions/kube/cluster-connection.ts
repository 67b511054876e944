import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { KubeConnection } from './in-cluster';

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

  constructor(readonly access: ClusterAccess) {
    // Plain HTTP only for local API servers (the fake one, kubectl proxy) or where the setting
    // allowInsecureConnection accepts it (functions/kube/connect.ts): no TLS to configure.
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

/**
 * What makes a connection unsafe for its credentials: a plain-HTTP server receives the bearer
 * token (and every answer) in cleartext, and a server whose certificate is not verified may be
 * anyone on the path, who then holds the token. Empty when neither.
 */
export function insecureConnectionProblems(access: ClusterAccess): string[] {
  const problems: string[] = [];
  if (access.server.startsWith('http:')) {
    problems.push(
      `the server ${access.server} is plain HTTP: the bearer token and every answer would travel unencrypted`,
    );
  } else if (access.insecureSkipTlsVerify === true) {
    problems.push(
      "insecure-skip-tls-verify is set: the server's certificate would not be checked, so whoever can intercept the connection could pose as the API server and take the token",
    );
  }
  return problems;
}

/** True for a server on this machine (127.0.0.0/8, ::1, localhost): nothing leaves the host. */
export function isLoopbackServer(server: string): boolean {
  let host: string;
  try {
    host = new URL(server).hostname;
  } catch {
    return false;
  }
  return host === 'localhost' || host === '[::1]' || /^127(\.\d{1,3}){3}$/.test(host);
}

/**
 * The connection with a bound on each request's whole time, answer body included: the API
 * client's own timeout is on idle time only, so a server that trickles a byte every few seconds
 * would hold a sync until the function's timeout. A request past the bound is aborted (a
 * retryable error); a signal the caller gave still applies.
 */
export function withRequestDeadline(connection: KubeConnection, totalMs: number): KubeConnection {
  return {
    getCurrentCluster: () => connection.getCurrentCluster(),
    applyToHTTPSOptions: async (options) => {
      await connection.applyToHTTPSOptions(options);
      const deadline = AbortSignal.timeout(totalMs);
      options.signal =
        options.signal === undefined ? deadline : AbortSignal.any([options.signal, deadline]);
    },
  };
}

/** A token file read on each request: projected ServiceAccount tokens are rewritten as they expire. */
export function tokenFromFile(path: string): () => string {
  return () => readFileSync(path, 'utf8').trim();
}
