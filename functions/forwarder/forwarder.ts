import { createServer, type Server } from 'node:http';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { ClaimPolicy } from '../core/claim';
import {
  nodeChangeAffectsHosts,
  shouldEnqueueServiceAdd,
  shouldEnqueueServiceDelete,
  shouldEnqueueServiceUpdate,
} from '../core/enqueue-filters';
import type { NodePolicy } from '../core/node-policy';
import type { Node, Service } from '../core/objects';
import type { WorkMessage } from '../contract/work-messages';
import { nodeFingerprint, serviceFingerprint } from './fingerprints';
import {
  endpointSlicesPath,
  inIpMode,
  serviceKeyOfSlice,
  servicesToSync,
  sliceDigest,
  SliceStore,
  type EndpointSliceObject,
  type SliceFingerprint,
} from './endpoint-slices';
import { Publisher } from './publisher';
import { KubeApiClient } from '../kube/kube-api-client';
import type { KubeConnection } from '../kube/in-cluster';
import { streamListPage } from '../kube/list-stream';
import { ResourceWatch } from './resource-watch';

export interface ForwarderOptions {
  /** The Pod's ServiceAccount (InClusterConnection), or a client-node KubeConfig outside the cluster. */
  readonly kubeConfig: KubeConnection;
  readonly claim: ClaimPolicy;
  readonly nodePolicy: NodePolicy;
  /** Sends a batch of at most 10 messages to the work queue. */
  readonly send: (messages: WorkMessage[]) => Promise<void>;
  readonly bufferCapacity?: number;
  /** How often a heartbeat goes to the work queue (default 60 s); the first goes at start. */
  readonly heartbeatSeconds?: number;
  /** `/healthz` fails once every send has failed for this long (default 300 s): a restart may help. */
  readonly unhealthyAfterSeconds?: number;
  /**
   * `/healthz` fails once a resource's list or watch has failed this many times in a row (default
   * 20): a restart renews the connection, and restarts are what a cluster's own monitoring sees.
   */
  readonly unhealthyAfterWatchFailures?: number;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly now?: () => number;
  readonly log?: (
    level: 'info' | 'warn' | 'error',
    message: string,
    fields?: Record<string, unknown>,
  ) => void;
}

/**
 * The in-cluster forwarder: watches Services, Nodes and the EndpointSlices of Services in ip mode,
 * applies the core's enqueue filters (S1, S2 and the node-membership filter) to compact
 * fingerprints, and publishes keys to the work queue.
 */
export class Forwarder {
  readonly publisher: Publisher;
  readonly services: ResourceWatch<V1Service, Service>;
  readonly nodes: ResourceWatch<V1Node, Node>;
  readonly slices: ResourceWatch<EndpointSliceObject, SliceFingerprint>;
  /** The slice fingerprints, by Service too: `sliceStore.size` slices of `.services` Services. */
  readonly sliceStore = new SliceStore();
  filtered = 0;
  private readonly http: KubeApiClient;
  private server: Server | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private stopping = false;
  /** Send failures already reported by a heartbeat that reached the queue. */
  private reportedSendFailures = 0;
  /** Watch failures already reported by a heartbeat that reached the queue. */
  private reportedWatchFailures = 0;
  private readonly heartbeatMs: number;
  private readonly unhealthyAfterMs: number;
  private readonly unhealthyAfterWatchFailures: number;

  constructor(options: ForwarderOptions) {
    const sleep =
      options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
    const log = options.log ?? (() => undefined);
    const http = (this.http = new KubeApiClient(options.kubeConfig));
    this.heartbeatMs = (options.heartbeatSeconds ?? 60) * 1000;
    this.unhealthyAfterMs = (options.unhealthyAfterSeconds ?? 300) * 1000;
    this.unhealthyAfterWatchFailures = options.unhealthyAfterWatchFailures ?? 20;
    this.publisher = new Publisher(options.send, {
      capacity: options.bufferCapacity ?? 10_000,
      maxBackoffMs: 30_000,
      sleep,
      ...(options.now ? { now: options.now } : {}),
      onSendError: (error) =>
        log('warn', 'sending to the work queue failed; will retry', { error: String(error) }),
      prepare: (message) =>
        message.kind === 'heartbeat'
          ? {
              ...message,
              sendFailures: this.publisher.metrics.sendFailures - this.reportedSendFailures,
              watchFailures: this.watchFailures - this.reportedWatchFailures,
              failingWatches: this.failingWatches,
            }
          : message,
      onSent: (messages) => {
        for (const message of messages) {
          if (message.kind !== 'heartbeat') continue;
          this.reportedSendFailures += message.sendFailures;
          this.reportedWatchFailures += message.watchFailures ?? 0;
        }
      },
    });
    const enqueue = async (message: WorkMessage | undefined) => {
      if (message === undefined) {
        this.filtered++;
        return;
      }
      await this.publisher.enqueue(message);
    };
    this.services = new ResourceWatch<V1Service, Service>({
      http,
      path: '/api/v1/services',
      listPage: (limit, token, onItem) =>
        streamListPage<V1Service>(http, '/api/v1/services', limit, token, onItem),
      keyOf: (s) => `${s.metadata?.namespace ?? ''}/${s.metadata?.name ?? ''}`,
      fingerprint: (s) => serviceFingerprint(s, options.claim),
      onChange: (key, old, current) => {
        // Out of ip mode, or gone: its slices are no longer work. Back in ip mode, this watch
        // sends a `service` message, whose full sync reads the slices.
        if (
          old !== undefined &&
          inIpMode(old, options.claim) &&
          (current === undefined || !inIpMode(current, options.claim))
        )
          this.sliceStore.forgetService(key);
        const wanted =
          current === undefined
            ? old !== undefined && shouldEnqueueServiceDelete(old, options.claim)
            : old === undefined
              ? shouldEnqueueServiceAdd(current, options.claim)
              : shouldEnqueueServiceUpdate(old, current, options.claim);
        const reason = current === undefined ? 'deleted' : old === undefined ? 'added' : 'updated';
        return enqueue(wanted ? { v: 1, kind: 'service', key, reason } : undefined);
      },
      sleep,
      onRestart: (error) => log('warn', 'service watch restarting', { error: String(error) }),
    });
    this.nodes = new ResourceWatch<V1Node, Node>({
      http,
      path: '/api/v1/nodes',
      listPage: (limit, token, onItem) =>
        streamListPage<V1Node>(http, '/api/v1/nodes', limit, token, onItem),
      keyOf: (n) => n.metadata?.name ?? '',
      fingerprint: nodeFingerprint,
      onChange: (key, old, current) =>
        enqueue(
          nodeChangeAffectsHosts(old, current, options.nodePolicy)
            ? {
                v: 1,
                kind: 'node',
                reason: nodeChangeReason(
                  key,
                  current === undefined ? 'deleted' : old === undefined ? 'added' : 'changed',
                ),
              }
            : undefined,
        ),
      sleep,
      onRestart: (error) => log('warn', 'node watch restarting', { error: String(error) }),
    });
    this.slices = this.sliceWatch(http, options.claim, enqueue, sleep, log);
  }

  /** The EndpointSlices of Services in ip mode (issue 36): a `targets` message per change. */
  private sliceWatch(
    http: KubeApiClient,
    claim: ClaimPolicy,
    enqueue: (message: WorkMessage | undefined) => Promise<void>,
    sleep: (ms: number) => Promise<void>,
    log: NonNullable<ForwarderOptions['log']>,
  ): ResourceWatch<EndpointSliceObject, SliceFingerprint> {
    return new ResourceWatch<EndpointSliceObject, SliceFingerprint>({
      http,
      path: endpointSlicesPath,
      listPage: (limit, token, onItem) =>
        streamListPage<EndpointSliceObject>(http, endpointSlicesPath, limit, token, onItem),
      keyOf: (slice) => `${slice.metadata?.namespace ?? ''}/${slice.metadata?.name ?? ''}`,
      store: this.sliceStore,
      // Only the slices of a Service this forwarder has seen in ip mode are kept. One seen before
      // its Service (created first, or the Service watch behind the slice watch) is dropped: the
      // Service, once seen, is sent as a `service` message, whose full sync reads its slices; the
      // slice's next change then finds no fingerprint and is sent as new (at worst one message
      // more than needed). Keeping slices for Services not seen yet would keep them for all.
      fingerprint: (slice) => {
        const service = serviceKeyOfSlice(slice);
        const fingerprint = service === undefined ? undefined : this.services.get(service);
        if (service === undefined || fingerprint === undefined) return undefined;
        if (!inIpMode(fingerprint, claim)) return undefined;
        return { service, digest: sliceDigest(slice) };
      },
      onChange: async (_key, old, current) => {
        const services = servicesToSync(old, current);
        if (services.length === 0) return enqueue(undefined);
        const reason = `endpoint slice ${current === undefined ? 'deleted' : old === undefined ? 'added' : 'changed'}`;
        for (const key of services) await enqueue({ v: 1, kind: 'targets', key, reason });
      },
      sleep,
      onRestart: (error) =>
        log('warn', 'endpoint slice watch restarting', { error: String(error) }),
    });
  }

  private get watches() {
    return [
      ['services', this.services],
      ['nodes', this.nodes],
      ['endpointslices', this.slices],
    ] as const;
  }

  get ready(): boolean {
    return this.watches.every(([, watch]) => watch.ready);
  }

  /** Failed lists and watches of every resource, since start. */
  get watchFailures(): number {
    return this.watches.reduce((sum, [, watch]) => sum + watch.restarts, 0);
  }

  /**
   * Resources not being seen: never listed yet, or whose latest list or watch failed with none
   * succeeding since (EndpointSlices are listed after the Services, so they count while the
   * Services cannot be listed either). Never listed counts, so that a pod the kubelet restarts (after
   * `unhealthyAfterWatchFailures`) reports its lost watches from its first heartbeat on, not a
   * healthy 0 until its own first failure: otherwise every restart would break the alarm's run of
   * failing periods and a crash-looping forwarder would never page.
   */
  get failingWatches(): number {
    return this.watches.filter(([, w]) => !w.ready || w.consecutiveFailures > 0).length;
  }

  /**
   * False once every send has failed for `unhealthyAfterSeconds`, or a resource's list or watch
   * has failed `unhealthyAfterWatchFailures` times in a row: `/healthz` then fails.
   */
  get healthy(): boolean {
    return this.unhealthyReason() === undefined;
  }

  private unhealthyReason(): string | undefined {
    if (this.publisher.failingForMs >= this.unhealthyAfterMs) {
      const seconds = Math.round(this.publisher.failingForMs / 1000);
      return `sends to the work queue have failed for ${seconds} s`;
    }
    for (const [resource, watch] of this.watches) {
      if (watch.consecutiveFailures >= this.unhealthyAfterWatchFailures) {
        return `the ${resource} list or watch has failed ${watch.consecutiveFailures} times in a row`;
      }
    }
    return undefined;
  }

  start(): void {
    this.publisher.start();
    this.services.start();
    this.nodes.start();
    // The slices once the Services are listed: each slice of a Service in ip mode then has its
    // fingerprint from the first list on, and the two lists never stream at once (memory).
    void this.services.listed.then(() => {
      if (!this.stopping) this.slices.start();
    });
    void this.heartbeat();
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), this.heartbeatMs);
  }

  /**
   * Tells the functions this forwarder is alive, with the sends and the lists or watches that
   * failed since the last heartbeat got through, and how many watches are failing: alive is not
   * enough, a forwarder refused its watches sends heartbeats but sees no change. The figures are
   * filled in as the heartbeat is sent (`prepare`): one queued while another is in flight would
   * otherwise report the same failures again.
   */
  private heartbeat(): Promise<void> {
    return this.publisher.enqueue({
      v: 1,
      kind: 'heartbeat',
      sendFailures: 0,
      pending: this.publisher.depth,
      watchFailures: 0,
      failingWatches: 0,
    });
  }

  /** Graceful stop (SIGTERM): stop watching, then deliver what is pending. Returns what was left. */
  async stop(flushTimeoutMs = 20_000): Promise<number> {
    clearInterval(this.heartbeatTimer);
    this.stopping = true;
    await Promise.all(this.watches.map(([, watch]) => watch.stop()));
    this.http.close();
    const left = await this.publisher.stop(flushTimeoutMs);
    await new Promise<void>((resolve) =>
      this.server ? this.server.close(() => resolve()) : resolve(),
    );
    return left;
  }

  /** `/healthz`, `/readyz` (every initial list done) and `/metrics` (Prometheus text). */
  listen(port: number, host = '0.0.0.0'): Promise<number> {
    this.server = createServer((req, res) => {
      if (req.url === '/healthz') {
        const reason = this.unhealthyReason();
        if (reason === undefined) return res.writeHead(200).end('ok\n');
        return res.writeHead(503).end(`${reason}\n`);
      }
      if (req.url === '/readyz')
        return res.writeHead(this.ready ? 200 : 503).end(this.ready ? 'ready\n' : 'listing\n');
      if (req.url === '/metrics') {
        return res
          .writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4' })
          .end(this.metricsText());
      }
      res.writeHead(404).end();
    });
    return new Promise((resolve) => {
      this.server?.listen(port, host, () => {
        const address = this.server?.address();
        resolve(typeof address === 'object' && address !== null ? address.port : port);
      });
    });
  }

  metricsText(): string {
    const lines: string[] = [];
    const metric = (
      name: string,
      type: 'counter' | 'gauge',
      help: string,
      samples: [string, number][],
    ) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, value] of samples) lines.push(`${name}${labels} ${value}`);
    };
    const perResource = (value: (watch: Forwarder['watches'][number][1]) => number) =>
      this.watches.map(([resource, watch]): [string, number] => [
        `{resource="${resource}"}`,
        value(watch),
      ]);
    metric(
      'forwarder_events_seen_total',
      'counter',
      'Watch events received.',
      perResource((w) => w.eventsSeen),
    );
    metric('forwarder_messages_forwarded_total', 'counter', 'Messages the work queue accepted.', [
      ['', this.publisher.metrics.forwarded],
    ]);
    metric('forwarder_events_filtered_total', 'counter', 'Changes that needed no work.', [
      ['', this.filtered],
    ]);
    metric(
      'forwarder_send_failures_total',
      'counter',
      'Failed sends to the work queue (retried).',
      [['', this.publisher.metrics.sendFailures]],
    );
    metric(
      'forwarder_send_failing_seconds',
      'gauge',
      'How long every send to the work queue has failed (0 while sends go through).',
      [['', Math.round(this.publisher.failingForMs / 1000)]],
    );
    metric('forwarder_buffer_depth', 'gauge', 'Keys waiting to be sent.', [
      ['', this.publisher.depth],
    ]);
    metric(
      'forwarder_watch_restarts_total',
      'counter',
      'Watch restarts after errors.',
      perResource((w) => w.restarts),
    );
    metric(
      'forwarder_watch_consecutive_failures',
      'gauge',
      'Failed lists or watches in a row (0 once a list completes or a watch opens).',
      perResource((w) => w.consecutiveFailures),
    );
    metric(
      'forwarder_objects_known',
      'gauge',
      'Objects whose fingerprint is held (EndpointSlices: of Services in ip mode only).',
      perResource((w) => w.size),
    );
    return `${lines.join('\n')}\n`;
  }
}

/**
 * A node message's reason, within the 200 characters the message schema allows: a node's name may
 * have 253, and a message over the limit would be dead-lettered with the node change it carries.
 */
export function nodeChangeReason(name: string, change: 'added' | 'deleted' | 'changed'): string {
  const shown = name.length > 160 ? `${name.slice(0, 160)}…` : name;
  return `node ${shown} ${change}`;
}
