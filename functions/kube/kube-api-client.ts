import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { KubeConnection } from './in-cluster';

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
 * Requests to the API server over Node's own HTTP stack, authenticated by the connection
 * (kubeconfig, EKS token, or the Pod's ServiceAccount): whole JSON answers for the functions, and
 * bodies read as they arrive for the forwarder's list pages and watches. This replaces
 * @kubernetes/client-node: that library and the undici fetch stack under it were half of each
 * Lambda bundle and most of its import time, and undici's WebAssembly HTTP parser cost the
 * forwarder more resident memory than everything it keeps; Node's built-in parser is native.
 */
export class KubeApiClient {
  private agent: { readonly key: string; readonly agent: http.Agent } | undefined;

  constructor(
    private readonly connection: KubeConnection,
    /** Idle time on the socket before a `request` (or a list page) is abandoned (a retryable error). */
    readonly timeoutMs = 30_000,
  ) {}

  async request<T>(request: KubeRequest): Promise<T> {
    const response = await this.send(request, { idleTimeoutMs: this.timeoutMs });
    const text = await readBody(response);
    const status = response.statusCode ?? 0;
    if (isSuccess(status)) return (text === '' ? {} : JSON.parse(text)) as T;
    throw new KubeApiError(
      status,
      text,
      `${request.method} ${request.path}: ${status} ${text.slice(0, 500)}`,
    );
  }

  /**
   * Starts a GET and resolves with the response, its body unread, once the status is a success;
   * otherwise rejects with KubeApiError (410 Gone drives a watch's re-list). The caller reads the
   * body as it arrives, so a list page is never held whole. No idle timeout: a watch is silent
   * between events, so the caller bounds it through `signal`; a list page, which is never silent
   * for long, may pass `idleTimeoutMs` instead.
   */
  async stream(
    path: string,
    query: Readonly<Record<string, string | undefined>>,
    signal?: AbortSignal,
    idleTimeoutMs?: number,
  ): Promise<IncomingMessage> {
    const response = await this.send({ method: 'GET', path, query }, { signal, idleTimeoutMs });
    const status = response.statusCode ?? 0;
    if (isSuccess(status)) return response;
    const text = await readBody(response).catch(() => '');
    throw new KubeApiError(status, text, `GET ${path}: ${status} ${text.slice(0, 500)}`);
  }

  private async send(
    request: KubeRequest,
    limits: {
      readonly idleTimeoutMs?: number | undefined;
      readonly signal?: AbortSignal | undefined;
    },
  ): Promise<IncomingMessage> {
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
      ...(limits.signal ? { signal: limits.signal } : {}),
    };
    // Applied on every request: tokens rotate (EKS re-mints, projected tokens are rewritten).
    await this.connection.applyToHTTPSOptions(options);
    options.agent = this.reuseAgent(options);
    const transport = url.protocol === 'https:' ? https : http;
    const idleTimeoutMs = limits.idleTimeoutMs;
    return new Promise<IncomingMessage>((resolve, reject) => {
      const outgoing = transport.request(url, options, resolve);
      outgoing.on('error', reject);
      if (idleTimeoutMs !== undefined) {
        // A kept-alive socket can be dead after a Lambda freeze: give up, and let the retry take
        // a fresh one, instead of waiting for the function's own timeout.
        outgoing.setTimeout(idleTimeoutMs, () =>
          outgoing.destroy(new Error(`no answer within ${idleTimeoutMs} ms`)),
        );
      }
      outgoing.end(payload);
    });
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

function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}

async function readBody(response: IncomingMessage): Promise<string> {
  response.setEncoding('utf8');
  let body = '';
  for await (const chunk of response) body += chunk as string;
  return body;
}
