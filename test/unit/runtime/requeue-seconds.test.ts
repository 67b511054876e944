import { describe, expect, it } from 'vitest';
import { maxGrowingRequeueSeconds, requeueSeconds } from '../../../functions/runtime/key-passes';

describe('requeue-after delays (issue 37)', () => {
  it('a fixed delay stays as asked, whatever the receive count', () => {
    expect(requeueSeconds({ seconds: 3 }, 7, () => 0)).toBe(3);
  });

  it('a growing one (AWS throttling) doubles with each receive, jittered, up to 16 s', () => {
    const top = () => 1 - Number.EPSILON;
    expect([1, 2, 3, 4, 5].map((n) => requeueSeconds({ seconds: 2, grows: true }, n, top))).toEqual(
      [2, 4, 8, 16, 16],
    );
    expect(requeueSeconds({ seconds: 2, grows: true }, 8, top)).toBe(maxGrowingRequeueSeconds);
    // Jitter takes up to half off, never below a second.
    expect(requeueSeconds({ seconds: 2, grows: true }, 4, () => 0)).toBe(8);
    expect(requeueSeconds({ seconds: 2, grows: true }, 1, () => 0)).toBe(1);
  });
});
