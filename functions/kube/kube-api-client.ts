import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { KubeConnection } from '../forwarder/in-cluster';

/** An API server answer other than 2xx: its status and body, as the error taxonomy needs them. */
export class KubeApiError extends Error {
  override readonly name = 'KubeApiError';
  constructor(
    readonly code: number,
    readonly body: string,
    message: string,
  ) {
    super(message);
  }
}

/** The patch types the controller sends; the API server applies each by its Content-Type. */
export const patchType = {
  strategicMerge: 'application/strategic-merge-patch+json',
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
} as const;

export interface KubeRequest {
  readonly method: 'GET' | 'POST' | 'PATCH';
  readonly path: string;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  readonly body?: unknown;
  /** For PATCH: one of `patchType`; JSON otherwise. */
  readonly contentType?: string;
}

/**
 * JSON requests to the API server over Node's own HTTP stack, authenticated by the connection
 * (kubeconfig, EKS token, or the Pod's ServiceAccount). This replaces @kubernetes/client-node in
 * the Lambda bundles: that library and the undici fetch stack under it were half of each bundle
 * and most of its import time, for the eight calls the controller makes.
 */
export class KubeApiClient {
  private agent: { readonly key: string; readonly agent: http.Agent } | undefined;

  constructor(
    private readonly connection: KubeConnection,
    /** Idle time on the socket before a request is abandoned (a retryable error). */
    private readonly timeoutMs = 30_000,
  ) {}

  async request<T>(request: KubeRequest): Promise<T> {
    const server = this.connection.getCurrentCluster()?.server;
    if (server === undefined) throw new Error('the kubeconfig has no current cluster');
    const url = new URL(server.replace(/\/$/, '') + request.path);
    for (const [name, value] of Object.entries(request.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    const payload = request.body === undefined ? undefined : JSON.stringify(request.body);
    const options: https.RequestOptions = {
      method: request.method,
      headers: {
        Accept: 'application/json',
        ...(payload === undefined
          ? {}
          : {
              'Content-Type': request.contentType ?? 'application/json',
              'Content-Length': Buffer.byteLength(payload),
            }),
      },
    };
    // Applied on every request: tokens rotate (EKS re-mints, projected tokens are rewritten).
    await this.connection.applyToHTTPSOptions(options);
    options.agent = this.reuseAgent(options);
    const transport = url.protocol === 'https:' ? https : http;
    let outgoing: http.ClientRequest | undefined;
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      outgoing = transport.request(url, options, resolve);
      outgoing.on('error', reject);
      // A kept-alive socket can be dead after a Lambda freeze: give up, and let the retry take
      // a fresh one, instead of waiting for the function's own timeout.
      outgoing.setTimeout(this.timeoutMs, () =>
        outgoing?.destroy(new Error(`no answer within ${this.timeoutMs} ms`)),
      );
      outgoing.end(payload);
    });
    const text = await readBody(response);
    const status = response.statusCode ?? 0;
    if (status >= 200 && status < 300) return (text === '' ? {} : JSON.parse(text)) as T;
    throw new KubeApiError(
      status,
      text,
      `${request.method} ${request.path}: ${status} ${text.slice(0, 500)}`,
    );
  }

  /**
   * A connection may hand out a fresh agent per request (client-node's KubeConfig does); keeping
   * one while the TLS material is the same keeps connections alive across calls and invocations.
   */
  private reuseAgent(options: https.RequestOptions): http.Agent | undefined {
    const fresh = options.agent;
    if (!(fresh instanceof http.Agent)) return undefined;
    const key = JSON.stringify([options.ca, options.cert, options.key, options.pfx]);
    if (this.agent?.key !== key || this.agent.agent.constructor !== fresh.constructor) {
      this.agent?.agent.destroy();
      this.agent = { key, agent: fresh };
    } else if (fresh !== this.agent.agent) {
      fresh.destroy();
    }
    return this.agent.agent;
  }

  close(): void {
    this.agent?.agent.destroy();
    this.agent = undefined;
  }
}

async function readBody(response: IncomingMessage): Promise<string> {
  response.setEncoding('utf8');
  let body = '';
  for await (const chunk of response) body += chunk as string;
  return body;
}
