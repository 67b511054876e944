/** S6: the per-key exponential backoff, `min(max, base·2^(n−1))` seconds for the n-th failure. */
export function backoffSeconds(failures: number, baseSeconds: number, maxSeconds: number): number {
  const n = Math.max(1, failures);
  return Math.min(maxSeconds, baseSeconds * 2 ** (n - 1));
}
