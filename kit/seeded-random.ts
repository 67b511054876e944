/**
 * mulberry32, a small deterministic PRNG: a fault storm in the tests or the jitter of a benchmark
 * draws the same numbers every run.
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Draws 1 (a miss, for a fault's `probability`) for the first `misses` draws, then 0 (a hit). */
export function missFirst(misses: number): () => number {
  let drawn = 0;
  return () => (drawn++ < misses ? 1 : 0);
}
