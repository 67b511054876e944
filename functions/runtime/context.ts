import type { ControllerConfig } from '../contract/controller-config';
import type { SyncDependencies } from '../sync/dependencies';
import type {
  LifecyclePublisher,
  OrphanCleanup,
  RuntimeLog,
  RuntimeMetrics,
  RuntimeStore,
  WorkQueue,
} from './ports';

/** Everything the handlers need, built once per cold start (see functions/wiring/). */
export interface RuntimeContext {
  readonly config: ControllerConfig;
  /**
   * The use cases' dependencies, less the state store, which is fenced per lease, and the
   * lifecycle recorder, which is one per sync.
   */
  readonly syncDeps: Omit<SyncDependencies, 'state' | 'lifecycle'>;
  /** Where lifecycle events go; absent when publishing is off (no bus configured). */
  readonly lifecycle?: LifecyclePublisher | undefined;
  readonly provider: OrphanCleanup;
  readonly store: RuntimeStore;
  readonly queue: WorkQueue;
  /** Node messages' queue: the node queue when one is configured, else the work queue. */
  readonly nodeQueue: WorkQueue;
  /** True when node messages have a queue of their own (`nodeQueueUrl`). */
  readonly separateNodeQueue: boolean;
  readonly log: RuntimeLog;
  readonly metrics: RuntimeMetrics;
  /** A unique lease owner per pass (invocation id + counter). */
  readonly newOwner: () => string;
  /** Jitter's source (Math.random when absent; seeded in the benchmark, so runs repeat). */
  readonly random?: (() => number) | undefined;
}
