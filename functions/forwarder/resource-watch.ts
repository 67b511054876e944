import { KubeApiError, type KubeApiClient } from '../kube/kube-api-client';
import { streamListPage, type ListPageMetadata } from '../kube/list-stream';
import { readWatchStream } from './watch-stream';

export interface ListPage<T> {
  readonly items: T[];
  readonly metadata?:
    | { readonly resourceVersion?: string | undefined; readonly _continue?: string | undefined }
    | undefined;
}

/**
 * One page of a list, as plain JSON, its items gathered in an array (ResourceWatch does not
 * gather them: it takes each from `streamListPage` as it arrives). The typed API clients would pull client-node's generated models for
 * every Kubernetes kind into the forwarder (about 80 MiB of resident memory), for two list calls.
 */
export async function listPage<T>(
  http: KubeApiClient,
  path: string,
  limit: number,
  continueToken: string | undefined,
): Promise<ListPage<T>> {
  const items: T[] = [];
  const metadata = await streamListPage<T>(http, path, limit, continueToken, (item) => {
    items.push(item);
  });
  return { items, metadata };
}

/** Where a ResourceWatch keeps its fingerprints: a Map, unless the caller needs an index of its own. */
export interface FingerprintStore<F> {
  readonly size: number;
  get(key: string): F | undefined;
  set(key: string, fingerprint: F): void;
  delete(key: string): void;
  keys(): IterableIterator<string>;
}

export interface ResourceWatchOptions<T, F> {
  readonly http: KubeApiClient;
  /** Watch path, e.g. `/api/v1/services`. */
  readonly path: string;
  /**
   * One page of the list, each item handed to `onItem` as it arrives (awaited), so neither the
   * page nor its objects are held: a page of objects at Kubernetes' size limit is 150 MB.
   */
  readonly listPage: (
    limit: number,
    continueToken: string | undefined,
    onItem: (object: T) => Promise<void>,
  ) => Promise<ListPageMetadata>;
  readonly keyOf: (object: T) => string;
  /**
   * What is kept of the object; undefined keeps nothing (objects that can never be work, such as
   * the slices of Services not in ip mode), and one kept before is then reported as deleted.
   */
  readonly fingerprint: (object: T) => F | undefined;
  /**
   * Called for every change of a kept object in order (add: old undefined; delete: current
   * undefined); may wait (back-pressure). Objects never kept are not reported.
   */
  readonly onChange: (key: string, old: F | undefined, current: F | undefined) => Promise<void>;
  /** Where fingerprints are kept; a Map by default. */
  readonly store?: FingerprintStore<F>;
  readonly sleep: (ms: number) => Promise<void>;
  readonly onRestart?: (error: unknown) => void;
  readonly pageSize?: number;
  readonly maxBackoffMs?: number;
}

interface WatchObject {
  metadata?: { resourceVersion?: string; name?: string; namespace?: string };
  code?: number;
}

/**
 * List-then-watch for one resource, holding only fingerprints (never whole objects). A watch that
 * ends resumes from the last resourceVersion; 410 Gone re-lists, and the re-list is compared with
 * what was known, so changes made during the gap, deletions included, still reach `onChange`.
 * Any other error restarts with capped, jittered backoff. Unlike client-node's informer, which
 * stops on errors and caches whole objects, it never gives up and stays small.
 */
export class ResourceWatch<T extends WatchObject, F> {
  private readonly known: FingerprintStore<F>;
  private resourceVersion = '';
  private running = false;
  private abort: AbortController | undefined;
  private chain: Promise<void> = Promise.resolve();
  private loop: Promise<void> | undefined;
  ready = false;
  /** Lists and watches that failed (each is followed by a restart). */
  restarts = 0;
  /**
   * Failures since a list last completed or a watch last opened: what says the resource is not
   * being seen (a 403 after lost RBAC retries for ever). A watch that opens and ends normally
   * counts none; the backoff's own count is separate, as it resets only when a watch ends well.
   */
  consecutiveFailures = 0;
  eventsSeen = 0;
  private markListed: () => void = () => undefined;
  /** Settles when the first list has completed (never, if it is stopped before). */
  readonly listed = new Promise<void>((resolve) => (this.markListed = resolve));

  constructor(private readonly options: ResourceWatchOptions<T, F>) {
    this.known = options.store ?? new Map<string, F>();
  }

  /** Objects whose fingerprint is kept. */
  get size(): number {
    return this.known.size;
  }

  /** The latest fingerprint seen for the key: updated as each event arrives, before `onChange`. */
  get(key: string): F | undefined {
    return this.known.get(key);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.abort?.abort();
    await this.loop;
    await this.chain;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (this.running) {
      try {
        if (this.resourceVersion === '') await this.relist();
        if (!this.running) break;
        await this.watchOnce();
        failures = 0;
      } catch (error) {
        if (!this.running) break;
        failures++;
        this.restarts++;
        this.consecutiveFailures++;
        this.options.onRestart?.(error);
        const ceiling = Math.min(
          this.options.maxBackoffMs ?? 30_000,
          1000 * 2 ** Math.min(failures - 1, 10),
        );
        await this.options.sleep(ceiling / 2 + Math.random() * (ceiling / 2));
      }
    }
  }

  /**
   * Lists every page, reporting each object against what was known as it arrives (all adds the
   * first time), then the deletions. Only keys are gathered: one fingerprint per object is held,
   * never a second set of them or a page of objects.
   */
  private async relist(): Promise<void> {
    const seen = new Set<string>();
    let token: string | undefined;
    let resourceVersion = '';
    do {
      const page = await this.options.listPage(
        this.options.pageSize ?? 100,
        token,
        async (object) => {
          const key = this.options.keyOf(object);
          const current = this.options.fingerprint(object);
          const old = this.known.get(key);
          this.keep(key, current);
          if (current !== undefined) seen.add(key);
          if (old !== undefined || current !== undefined)
            await this.options.onChange(key, old, current);
        },
      );
      resourceVersion = page.resourceVersion ?? resourceVersion;
      token = page._continue || undefined;
    } while (token !== undefined);
    for (const key of [...this.known.keys()]) {
      const old = this.known.get(key);
      // Seen, or dropped meanwhile by the store's owner (a Service left ip mode).
      if (seen.has(key) || old === undefined) continue;
      this.known.delete(key);
      await this.options.onChange(key, old, undefined);
    }
    this.resourceVersion = resourceVersion;
    this.ready = true;
    this.markListed();
    this.consecutiveFailures = 0;
  }

  private async watchOnce(): Promise<void> {
    // As client-go does: the server ends the watch after a randomised 5 to 10 minutes; one still
    // open a minute past that has a dead peer and is given up from this side.
    const timeoutSeconds = 300 + Math.floor(Math.random() * 300);
    const abort = new AbortController();
    this.abort = abort;
    if (!this.running) abort.abort();
    const deadline = setTimeout(() => abort.abort(), (timeoutSeconds + 60) * 1000);
    try {
      const response = await this.options.http.stream(
        this.options.path,
        {
          watch: 'true',
          resourceVersion: this.resourceVersion,
          allowWatchBookmarks: 'true',
          timeoutSeconds: String(timeoutSeconds),
        },
        abort.signal,
      );
      this.consecutiveFailures = 0;
      await readWatchStream(response, (type, object) => this.handle(type, object as T));
    } catch (error) {
      if (error instanceof KubeApiError && error.code === 410) {
        this.resourceVersion = '';
      } else if (!abort.signal.aborted) {
        throw error;
      }
    } finally {
      clearTimeout(deadline);
    }
    // Everything the watch delivered is forwarded before it is resumed.
    await this.chain;
  }

  private keep(key: string, fingerprint: F | undefined): void {
    if (fingerprint === undefined) this.known.delete(key);
    else this.known.set(key, fingerprint);
  }

  private handle(type: string, object: T): void {
    this.eventsSeen++;
    if (type === 'ERROR') {
      // An in-stream 410: the stream ends next; re-list then.
      if (object.code === 410) this.resourceVersion = '';
      return;
    }
    if (type !== 'BOOKMARK') {
      const key = this.options.keyOf(object);
      const old = this.known.get(key);
      if (type === 'DELETED') {
        this.known.delete(key);
        const last = old ?? this.options.fingerprint(object);
        if (last !== undefined)
          this.chain = this.chain.then(() => this.options.onChange(key, last, undefined));
      } else {
        const current = this.options.fingerprint(object);
        this.keep(key, current);
        if (old !== undefined || current !== undefined)
          this.chain = this.chain.then(() => this.options.onChange(key, old, current));
      }
    }
    const version = object.metadata?.resourceVersion;
    if (version) this.resourceVersion = version;
  }
}
