import { describe, expect, it } from 'vitest';
import { eventSourceMaxConcurrency } from '../../../functions/contract/queue-limits';

describe('work queue concurrency from the ELBv2 call budget', () => {
  it('gives one worker per 4 calls a second of budget', () => {
    expect(eventSourceMaxConcurrency(20)).toBe(5);
    expect(eventSourceMaxConcurrency(41)).toBe(10);
  });

  it('never goes below the event source mapping minimum of 2 or above 1000', () => {
    expect(eventSourceMaxConcurrency(1)).toBe(2);
    expect(eventSourceMaxConcurrency(100000)).toBe(1000);
  });
});
