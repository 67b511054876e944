import { describe, expect, it } from 'vitest';
import { backoffSeconds } from '../../../functions/core/backoff';

describe('per-key backoff (S6)', () => {
  it('starts at the base and doubles with each failure', () => {
    expect([1, 2, 3, 4, 5].map((n) => backoffSeconds(n, 5, 300))).toEqual([5, 10, 20, 40, 80]);
  });

  it('is capped at the maximum', () => {
    expect([6, 7, 20].map((n) => backoffSeconds(n, 5, 300))).toEqual([160, 300, 300]);
  });

  it('treats a count below one as the first failure', () => {
    expect(backoffSeconds(0, 5, 300)).toBe(5);
  });
});
