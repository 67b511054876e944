/**
 * Virtual time for simulating asynchronous code without waiting: `sleep` registers a timer, and
 * `run` lets every microtask settle, then jumps to the earliest timer. It works as long as the
 * simulated code waits only on this clock and on promises (no real I/O, no real timers), which is
 * what the fakes in bench/sim provide.
 */
import type { Clock } from '../../functions/sync/ports';

interface Timer {
  readonly at: number;
  readonly seq: number;
  readonly resolve: () => void;
}

/** Where virtual time 0 sits on the calendar (only for Date values handed to the code). */
const epoch = Date.parse('2026-11-30T12:00:00Z');

export class VirtualClock implements Clock {
  private nowMs = 0;
  private seq = 0;
  private readonly heap: Timer[] = [];
  /** How many timers have fired: a measure of the simulation's size. */
  steps = 0;

  /** Milliseconds since the start of the simulation. */
  get ms(): number {
    return this.nowMs;
  }

  now(): Date {
    return new Date(epoch + this.nowMs);
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) =>
      this.push({ at: this.nowMs + Math.max(0, ms), seq: this.seq++, resolve }),
    );
  }

  /** Runs the simulation until `main` settles; throws if it blocks or passes `limitMs`. */
  async run<T>(main: Promise<T>, limitMs: number): Promise<T> {
    let settled = false;
    const watched = main.finally(() => {
      settled = true;
    });
    watched.catch(() => undefined);
    for (;;) {
      // One macrotask turn: every pending microtask (promise continuation) runs before it.
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (settled) return watched;
      const next = this.pop();
      if (next === undefined) {
        throw new Error('virtual clock: the simulation is blocked (no timer pending)');
      }
      if (next.at > limitMs) {
        throw new Error(`virtual clock: the simulation passed its limit of ${limitMs / 1000} s`);
      }
      this.nowMs = next.at;
      this.steps++;
      next.resolve();
    }
  }

  /** Back to 0, for a simulation whose setup ran on the clock first: nothing may be pending. */
  rewind(): void {
    if (this.heap.length > 0) throw new Error('virtual clock: cannot rewind with timers pending');
    this.nowMs = 0;
  }

  private push(timer: Timer): void {
    const heap = this.heap;
    heap.push(timer);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  private pop(): Timer | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    heap[0] = last;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = i;
      if (left < heap.length && before(heap[left]!, heap[smallest]!)) smallest = left;
      if (right < heap.length && before(heap[right]!, heap[smallest]!)) smallest = right;
      if (smallest === i) break;
      [heap[i], heap[smallest]] = [heap[smallest]!, heap[i]!];
      i = smallest;
    }
    return top;
  }
}

function before(a: Timer, b: Timer): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}
