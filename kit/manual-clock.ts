import type { Clock } from '../functions/sync/ports';

/** A clock that moves only when told: `ms` (epoch ms) from `startMs`, on by `advance`. */
export class ManualClock implements Clock {
  ms: number;

  constructor(startMs: number) {
    this.ms = startMs;
  }

  now(): Date {
    return new Date(this.ms);
  }

  advance(seconds: number): void {
    this.ms += seconds * 1000;
  }
}
