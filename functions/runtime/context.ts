import type { DynamoStateStore } from '../aws/dynamo-state-store';
import type { NlbProvider } from '../aws/nlb-provider';
import type { WorkQueue } from '../aws/sqs-work-queue';
import type { ControllerConfig } from '../config';
import type { SyncDependencies } from '../sync/dependencies';
import type { LifecyclePublisher } from './lifecycle-feed';

export type LogFields = Record<string, unknown>;

/** Structured logging: every line carries the Service key and message id when there is one. */
export interface RuntimeLog {
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

/** EMF metrics, by name; dimensions kept few (outcome, kind) so they stay cheap. */
export interface RuntimeMetrics {
  count(name: string, value?: number, dimensions?: Record<string, string>): void;
  milliseconds(name: string, value: number): void;
}

/** Everything the handlers need, built once per cold start (see wiring.ts). */
export interface RuntimeContext {
  readonly config: ControllerConfig;
  /**
   * The use cases' dependencies, less the state store, which is fenced per lease, and the
   * lifecycle recorder, which is one per sync.
   */
  readonly base: Omit<SyncDependencies, 'state' | 'lifecycle'>;
  /** Where lifecycle events go; absent when publishing is off (no bus configured). */
  readonly lifecycle?: LifecyclePublisher | undefined;
  readonly provider: NlbProvider;
  readonly store: DynamoStateStore;
  readonly queue: WorkQueue;
  /** Node messages' queue: the node queue when one is configured, else the work queue. */
  readonly nodeQueue: WorkQueue;
  /** True when node messages have a queue of their own (`nodeQueueUrl`). */
  readonly separateNodeQueue: boolean;
  readonly log: RuntimeLog;
  readonly metrics: RuntimeMetrics;
  /** A unique lease owner per pass (invocation id + counter). */
  readonly newOwner: () => string;
}

/** S6: the per-key exponential backoff, `min(max, base·2^(n−1))` seconds for the n-th failure. */
export function backoffSeconds(failures: number, baseSeconds: number, maxSeconds: number): number {
  const n = Math.max(1, failures);
  return Math.min(maxSeconds, baseSeconds * 2 ** (n - 1));
}
