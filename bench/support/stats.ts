/** Nearest-rank percentile (p in 0..100) of unsorted values; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

export function sum(values: readonly number[]): number {
  return values.reduce((total, v) => total + v, 0);
}

/** Rounds to `digits` significant decimals for reports (keeps integers as they are). */
export function round(value: number, digits = 2): number {
  if (!Number.isFinite(value)) return value;
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** Times an async function in milliseconds of wall time. */
export async function timed<T>(run: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const started = performance.now();
  const result = await run();
  return { result, ms: performance.now() - started };
}
