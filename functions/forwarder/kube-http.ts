import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { KubeConnection } from './in-cluster';

/** An API server answer other than 200, with its status (410 Gone drives a re-list). */
export class KubeHttpError extends Error {
  override readonly name = 'KubeHttpError';
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * GET requests to the API server over Node's own HTTP stack, authenticated by the connection: the
 * Pod's ServiceAccount in the cluster, or client-node's KubeConfig elsewhere (tokens, client
 * certificates, exec plugins and proxies as kubeconfig describes them). client-node's fetch path goes through the undici package and its WebAssembly HTTP
 * parser, which costs the forwarder more resident memory than everything it keeps; Node's
 * built-in parser is native.
 */
export class KubeHttp {
  private agent: { readonly key: string; readonly agent: http.Agent } | undefined;

  constructor(private readonly kubeConfig: KubeConnection) {}

  /** Starts a GET and resolves with the response once its status is 200. */
  async get(
    path: string,
    query: Readonly<Record<string, string | undefined>>,
    signal?: AbortSignal,
  ): Promise<IncomingMessage> {
    const server = this.kubeConfig.getCurrentCluster()?.server;
    if (server === undefined) throw new Error('the kubeconfig has no current cluster');
    const url = new URL(server.replace(/\/$/, '') + path);
    for (const [name, value] of Object.entries(query)) {
      if (value !== undefined) url.searchParams.set(name, value);
    }
    const options: https.RequestOptions = {
      method: 'GET',
      headers: { Accept: 'application/json' },
      ...(signal ? { signal } : {}),
    };
    // Applied on every request: tokens from files and exec plugins rotate.
    await this.kubeConfig.applyToHTTPSOptions(options);
    options.agent = this.reuseAgent(options);
    const transport = url.protocol === 'https:' ? https : http;
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const request = transport.request(url, options, resolve);
      request.on('error', reject);
      request.end();
    });
    if (response.statusCode === 200) return response;
    const body = await readBody(response).catch(() => '');
    throw new KubeHttpError(
      response.statusCode ?? 0,
      `GET ${path}: ${response.statusCode ?? '?'} ${body.slice(0, 500)}`,
    );
  }

  /** GET of a JSON document. */
  async getJson<T>(
    path: string,
    query: Readonly<Record<string, string | undefined>>,
    signal?: AbortSignal,
  ): Promise<T> {
    const response = await this.get(path, query, signal);
    return JSON.parse(await readBody(response)) as T;
  }

  /**
   * KubeConfig makes a new agent per request; keeping one while the TLS material is the same
   * keeps connections alive across list pages and watch restarts.
   */
  private reuseAgent(options: https.RequestOptions): http.Agent | undefined {
    const fresh = options.agent;
    if (!(fresh instanceof http.Agent)) return undefined;
    const key = JSON.stringify([options.ca, options.cert, options.key, options.pfx]);
    if (this.agent?.key !== key || this.agent.agent.constructor !== fresh.constructor) {
      this.agent?.agent.destroy();
      this.agent = { key, agent: fresh };
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

/**
 * Reads a watch response line by line (one JSON event per line), calling `onEvent` for each.
 * Resolves when the server ends the stream; rejects on a broken connection or a bad line.
 */
export async function readWatchStream(
  response: IncomingMessage,
  onEvent: (type: string, object: unknown) => void,
): Promise<void> {
  response.setEncoding('utf8');
  let pending = '';
  const emit = (line: string) => {
    if (line.trim() === '') return;
    const event = JSON.parse(line) as { type?: unknown; object?: unknown };
    if (typeof event.type !== 'string') throw new Error(`watch event without a type: ${line}`);
    onEvent(event.type, event.object);
  };
  for await (const chunk of response) {
    pending += chunk as string;
    let newline = pending.indexOf('\n');
    while (newline >= 0) {
      emit(pending.slice(0, newline));
      pending = pending.slice(newline + 1);
      newline = pending.indexOf('\n');
    }
  }
  emit(pending);
}
