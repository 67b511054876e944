/**
 * What the simulated functions would be billed for, on virtual time (issue 37): Lambda duration
 * per invocation (GB-seconds, from the handler's start to its end, without the invoke itself),
 * and, within it, the time no remote call was in flight: waiting (for a rate budget, a retry, a
 * lease) rather than working. CPU time is not modelled: in the simulation the handler's own code
 * takes no time, so every millisecond of an invocation is either a call or a wait.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { VirtualClock } from './virtual-clock';

interface Invocation {
  inFlight: number;
  idleSince: number;
  idleMs: number;
  /** The same for the sync's own calls (ELBv2, EC2, Kubernetes) alone. */
  syncInFlight: number;
  syncSince: number;
  syncMs: number;
}

/**
 * Whose call it is: the sync's own (ELBv2, EC2, tagging, Kubernetes), which any layout of the
 * state and the queues makes, or the layout's (DynamoDB, SQS, the fleet budgets).
 */
export type CallKind = 'sync' | 'layout';

export interface LambdaTotals {
  invocations: number;
  /** Handler time, each invocation rounded up to the millisecond as Lambda bills it. */
  billedMs: number;
  /** Of that, time with no remote call in flight. */
  waitingMs: number;
  /** Of that, time with one of the sync's own calls in flight (`CallKind`). */
  syncMs: number;
}

export class LambdaMeter {
  readonly totals: LambdaTotals = { invocations: 0, billedMs: 0, waitingMs: 0, syncMs: 0 };
  private readonly current = new AsyncLocalStorage<Invocation>();

  constructor(
    private readonly clock: VirtualClock,
    /** The functions' memory (infra/service-controller.ts: 512 MB). */
    readonly memoryMiB = 512,
  ) {}

  /** Runs one invocation's handler and bills it. */
  async invoke<T>(handler: () => Promise<T>): Promise<T> {
    const started = this.clock.ms;
    const invocation: Invocation = {
      inFlight: 0,
      idleSince: started,
      idleMs: 0,
      syncInFlight: 0,
      syncSince: started,
      syncMs: 0,
    };
    try {
      return await this.current.run(invocation, handler);
    } finally {
      const ended = this.clock.ms;
      if (invocation.inFlight === 0) invocation.idleMs += ended - invocation.idleSince;
      this.totals.invocations++;
      this.totals.billedMs += Math.max(1, Math.ceil(ended - started));
      this.totals.waitingMs += invocation.idleMs;
      this.totals.syncMs += invocation.syncMs;
    }
  }

  /** One remote call (its round trip): in flight for the invocation that makes it, if any. */
  async call<T>(roundTrip: () => Promise<T>, kind: CallKind = 'layout'): Promise<T> {
    const invocation = this.current.getStore();
    if (invocation === undefined) return roundTrip();
    if (invocation.inFlight++ === 0) invocation.idleMs += this.clock.ms - invocation.idleSince;
    if (kind === 'sync' && invocation.syncInFlight++ === 0) invocation.syncSince = this.clock.ms;
    try {
      return await roundTrip();
    } finally {
      if (--invocation.inFlight === 0) invocation.idleSince = this.clock.ms;
      if (kind === 'sync' && --invocation.syncInFlight === 0)
        invocation.syncMs += this.clock.ms - invocation.syncSince;
    }
  }

  get gbSeconds(): number {
    return (this.totals.billedMs / 1000) * (this.memoryMiB / 1024);
  }

  /** The share of billed time spent waiting (0 with no invocation). */
  get waitingShare(): number {
    return this.totals.billedMs === 0 ? 0 : this.totals.waitingMs / this.totals.billedMs;
  }
}
