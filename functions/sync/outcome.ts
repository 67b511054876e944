import { InvariantError, RequeueAfterError, TerminalError } from '../core/errors';

/**
 * How a sync ended, so the caller can choose: forget the key, wait a fixed delay, back off, or
 * only warn. Invariant errors are thrown instead, to alarm.
 */
export type SyncOutcome =
  | { readonly kind: 'done' }
  | { readonly kind: 'requeue-after'; readonly seconds: number; readonly reason: string }
  | { readonly kind: 'retry'; readonly error: unknown }
  | { readonly kind: 'terminal'; readonly error: TerminalError };

export const done: SyncOutcome = { kind: 'done' };

export function requeueAfter(seconds: number, reason: string): SyncOutcome {
  return { kind: 'requeue-after', seconds, reason };
}

/** Maps an error to an outcome by its kind (DESIGN §4); invariant errors are rethrown. */
export function outcomeOf(error: unknown): SyncOutcome {
  if (error instanceof InvariantError) throw error;
  if (error instanceof RequeueAfterError) return requeueAfter(error.seconds, error.message);
  if (error instanceof TerminalError) return { kind: 'terminal', error };
  return { kind: 'retry', error };
}
