import { describe, expect, it } from 'vitest';
import { elbv2Families, ProcessRateLimiter } from '../../../functions/aws/process-limiter';
import { RequeueAfterError } from '../../../functions/core/errors';
import { slotWaitBoundMs } from '../../../functions/core/registration-slots';

/** The limiter on a clock of its own; concurrent callers (a sleep does not move the clock). */
function limiterAt(now: { ms: number }) {
  const waits: number[] = [];
  const limiter = new ProcessRateLimiter({
    nowMs: () => now.ms,
    sleep: (ms) => {
      waits.push(ms);
      return Promise.resolve();
    },
  });
  return { limiter, waits };
}

async function outcome(call: Promise<void>): Promise<'ok' | number> {
  return call.then(
    () => 'ok' as const,
    (error: unknown) => {
      expect(error).toBeInstanceOf(RequeueAfterError);
      return (error as RequeueAfterError).seconds;
    },
  );
}

describe('the per-process ELBv2 limit (issue 37: no Lambda waits in line)', () => {
  it("lets a family's burst through at once, waits at most the bound, and sends the rest back through the queue", async () => {
    const now = { ms: 0 };
    const { limiter, waits } = limiterAt(now);
    const modify = elbv2Families.find((f) => f.pattern.test('ModifyTargetGroupAttributes'))!;
    const results: ('ok' | number)[] = [];
    for (let i = 0; i < modify.burst + 3; i++) {
      results.push(await outcome(limiter.take('ModifyTargetGroupAttributes')));
    }
    expect(results.slice(0, modify.burst).every((r) => r === 'ok')).toBe(true);
    // 3/s: the next slot is 333 ms off, past the 250 ms bound: back in a second, nothing booked.
    expect(results.slice(modify.burst)).toEqual([1, 1, 1]);
    expect(waits).toEqual([]);
    // A third of a second later, the one slot there is goes at once; the families are apart.
    now.ms = 334;
    expect(await outcome(limiter.take('ModifyListener'))).toBe('ok');
    expect(await outcome(limiter.take('DescribeTags'))).toBe('ok');
  });

  it('never sleeps past the bound, whatever the offered rate', async () => {
    const now = { ms: 0 };
    const { limiter, waits } = limiterAt(now);
    const operations = ['DescribeTargetHealth', 'CreateListener', 'AddTags', 'RegisterTargets'];
    let refused = 0;
    for (let i = 0; i < 2_000; i++) {
      now.ms += 7;
      const result = await outcome(limiter.take(operations[i % operations.length]!));
      if (result !== 'ok') refused++;
    }
    expect(Math.max(...waits)).toBeLessThanOrEqual(slotWaitBoundMs);
    expect(waits.length).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  });
});
