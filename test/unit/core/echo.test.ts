import { describe, expect, it } from 'vitest';
import { clipped, echoLimit, joinProblems, quoted } from '../../../functions/core/echo';

describe('quoted: a user value as a message may show it', () => {
  it('quotes a short value whole', () => {
    expect(quoted('internet-facing')).toBe('"internet-facing"');
  });

  it('cuts a long value to the echo limit, with an ellipsis and its full length', () => {
    const text = quoted('x'.repeat(200_000));
    expect(text).toBe(`"${'x'.repeat(echoLimit)}…" (200000 characters)`);
  });

  it('escapes quotes and line breaks, so a value cannot forge a second log line', () => {
    expect(quoted('a"b\nc')).toBe('"a\\"b\\nc"');
  });

  it('never splits a surrogate pair at the cut', () => {
    const text = quoted(`${'x'.repeat(echoLimit - 1)}😀${'y'.repeat(10)}`);
    expect(text).toBe(`"${'x'.repeat(echoLimit - 1)}…" (111 characters)`);
  });
});

describe('clipped: a user-given name, unquoted', () => {
  it('keeps a short name as it is and cuts a long one', () => {
    expect(clipped('example.com/key')).toBe('example.com/key');
    expect(clipped('k'.repeat(300))).toBe(`${'k'.repeat(echoLimit)}… (300 characters)`);
  });
});

describe('joinProblems', () => {
  it('joins a few problems with "; "', () => {
    expect(joinProblems(['a', 'b'])).toBe('a; b');
  });

  it('names the first ten and counts the rest', () => {
    const problems = Array.from({ length: 25_000 }, (_, i) => `p${i}`);
    expect(joinProblems(problems)).toBe(
      `${problems.slice(0, 10).join('; ')}; and 24990 more problems`,
    );
  });
});
