import {
  errorKind,
  InvariantError,
  type RequeueAfterError,
  type TerminalError,
} from '../core/errors';

/**
 * How a sync ended, so the caller can choose: forget the key, wait a fixed delay, back off, hand
 * over to the lease holder, or only warn. Invariant errors are thrown instead, to alarm.
 */
export type SyncOutcome =
  | { readonly kind: 'done' }
  | {
      readonly kind: 'requeue-after';
      readonly seconds: number;
      readonly reason: string;
      /** The delay grows with each return for the same reason (RequeueAfterError.grows). */
      readonly grows?: boolean;
    }
  | { readonly kind: 'retry'; readonly error: unknown }
  /** Someone else holds the key: not a failure, the failure count stays as it is. */
  | { readonly kind: 'busy'; readonly error: unknown }
  | {
      readonly kind: 'terminal';
      readonly error: TerminalError;
      /** Already warned for exactly these inputs (S11): say nothing new. */
      readonly repeated?: boolean;
    };

export const done: SyncOutcome = { kind: 'done' };

export function requeueAfter(seconds: number, reason: string): SyncOutcome {
  return { kind: 'requeue-after', seconds, reason };
}

/** Maps an error to an outcome by its kind (docs/design.md §4); invariant errors are rethrown. */
export function outcomeOf(error: unknown): SyncOutcome {
  switch (errorKind(error)) {
    case 'invariant':
      throw error instanceof InvariantError ? error : new InvariantError(String(error));
    case 'requeue-after': {
      const requeue = error as RequeueAfterError;
      return requeue.grows
        ? { kind: 'requeue-after', seconds: requeue.seconds, reason: requeue.message, grows: true }
        : requeueAfter(requeue.seconds, requeue.message);
    }
    case 'terminal':
      return { kind: 'terminal', error: error as TerminalError };
    case 'busy':
      return { kind: 'busy', error };
    case 'retryable':
      return { kind: 'retry', error };
  }
}
