import { describe, expect, it } from 'vitest';
import {
  BusyError,
  errorKind,
  InvariantError,
  NotFoundError,
  RequeueAfterError,
  RetryableError,
  TerminalError,
} from '../../../functions/core/errors';
import { outcomeOf } from '../../../functions/sync/outcome';

describe('error classification (docs/design.md §4)', () => {
  it.each([
    [new RetryableError('throttled'), 'retryable'],
    [new RequeueAfterError('provisioning', 15), 'requeue-after'],
    [new BusyError('lease held'), 'busy'],
    [new TerminalError('bad annotation'), 'terminal'],
    [new InvariantError('impossible'), 'invariant'],
    [new Error('unclassified'), 'retryable'],
    ['a string', 'retryable'],
  ])('%s is %s', (error, kind) => {
    expect(errorKind(error)).toBe(kind);
  });

  it('retryable errors (and unclassified ones) become a retry with backoff', () => {
    expect(outcomeOf(new RetryableError('throttled'))).toMatchObject({ kind: 'retry' });
    expect(outcomeOf(new Error('socket hang up'))).toMatchObject({ kind: 'retry' });
  });

  it('busy is its own outcome, so the failure count does not grow', () => {
    expect(outcomeOf(new BusyError('lease held'))).toMatchObject({ kind: 'busy' });
  });

  it('a vanished object (NotFound) is retried, so the next pass takes the vanished-object path', () => {
    expect(outcomeOf(new NotFoundError('services "default/web" not found'))).toMatchObject({
      kind: 'retry',
    });
  });

  it('requeue-after keeps its fixed delay', () => {
    expect(outcomeOf(new RequeueAfterError('provisioning', 15))).toEqual({
      kind: 'requeue-after',
      seconds: 15,
      reason: 'provisioning',
    });
  });

  it('terminal errors become a terminal outcome (Warning only, no hot retry)', () => {
    const error = new TerminalError('bad annotation');
    expect(outcomeOf(error)).toEqual({ kind: 'terminal', error });
  });

  it('invariant errors are thrown, to alarm', () => {
    expect(() => outcomeOf(new InvariantError('impossible'))).toThrow(InvariantError);
  });
});
