import { redactSecrets } from './redact';

/**
 * The error taxonomy (docs/design.md §4). Adapters translate SDK and API errors into these;
 * callers pick the handling from the kind: backoff, a fixed delay, a Warning only, or an alarm.
 */
export type ErrorKind = 'retryable' | 'requeue-after' | 'busy' | 'terminal' | 'invariant';

export abstract class ControllerError extends Error {
  abstract readonly kind: ErrorKind;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * What fixes a retryable failure. Time alone fixes `transient` and `throttling`; the others need
 * someone (a quota raised, capacity freed, a policy fixed, a dependency released or created), so
 * they are counted by class for an alarm, and retried with capped backoff so the fix is picked up
 * without a spec change.
 */
export type FailureClass =
  'transient' | 'throttling' | 'quota' | 'capacity' | 'permission' | 'dependency';

/**
 * Throttling, 5xx, timeouts, an unavailable API, and whatever someone outside the spec must fix
 * (quota, capacity, permission, dependency): retry with per-key exponential backoff (S6).
 */
export class RetryableError extends ControllerError {
  override readonly name = 'RetryableError';
  readonly kind = 'retryable';
  readonly failureClass: FailureClass;
  constructor(message: string, options?: { cause?: unknown; failureClass?: FailureClass }) {
    super(message, options);
    this.failureClass = options?.failureClass ?? 'transient';
  }
}

/** Not a failure: come back after a fixed delay (NLB provisioning, a security group still in use). */
export class RequeueAfterError extends ControllerError {
  override readonly name = 'RequeueAfterError';
  readonly kind = 'requeue-after';
  /**
   * The delay doubles each time the key's message comes back for it again (AWS throttling: a
   * crowd of passes that all come back at once would be throttled again), up to 16 s.
   */
  readonly grows: boolean;
  constructor(
    message: string,
    readonly seconds: number,
    options?: { cause?: unknown; grows?: boolean },
  ) {
    super(message, options);
    this.grows = options?.grows === true;
  }
}

/** Another worker holds the key's lease: not a failure, the holder runs once more. */
export class BusyError extends ControllerError {
  override readonly name = 'BusyError';
  readonly kind = 'busy';
}

/**
 * The user's spec is wrong and only a change to it can help: a Warning event once per spec, no
 * hot retry; the next change re-enqueues.
 */
export class TerminalError extends ControllerError {
  override readonly name = 'TerminalError';
  readonly kind = 'terminal';
}

/** An impossible state: a bug. Thrown, alarmed on. */
export class InvariantError extends ControllerError {
  override readonly name = 'InvariantError';
  readonly kind = 'invariant';
}

/**
 * The object the call was about does not exist (Kubernetes 404). Retryable: the next pass reads
 * the world again and takes the path for a vanished object.
 */
export class NotFoundError extends ControllerError {
  override readonly name = 'NotFoundError';
  readonly kind = 'retryable';
}

/**
 * How an error is handled. Errors we did not classify are retried with backoff, as upstream
 * retries every sync error; a bug therefore ends in the DLQ after the receive limit, not in a loop.
 */
export function errorKind(error: unknown): ErrorKind {
  return error instanceof ControllerError ? error.kind : 'retryable';
}

/** An error's message as the controller publishes it (events, logs): secrets masked. */
export function errorMessage(error: unknown): string {
  return redactSecrets(error instanceof Error ? error.message : String(error));
}

/** The class of a failure that will be retried; unclassified errors are transient. */
export function failureClassOf(error: unknown): FailureClass {
  return error instanceof RetryableError ? error.failureClass : 'transient';
}
