/**
 * The registration budget's DynamoDB item on virtual time: the two conditional updates of
 * DynamoTatItem with the same conditions, each after one state-table latency, counted as the
 * writes (1 WRU each) they would be. The controller's own TatBudgetStore and RegistrationBudget
 * run on top of it unchanged.
 */
import {
  RegistrationBudget,
  TatBudgetStore,
  type RegistrationBudgetSpec,
  type TatItem,
  type TatUpdate,
} from '../../functions/aws/registration-budget';
import type { VirtualClock } from './virtual-clock';

export interface BudgetItemStats {
  /** Conditional UpdateItem requests (each a write unit, refused or not). */
  writes: number;
  /** Of those, refused by their condition. */
  refused: number;
}

export class FakeTatItem implements TatItem {
  readonly stats: BudgetItemStats = { writes: 0, refused: 0 };
  private tat: number | undefined;

  constructor(
    private readonly clock: VirtualClock,
    private readonly latencyMs: number,
  ) {}

  async advance(nowMs: number, latestTat: number, intervalMs: number): Promise<TatUpdate> {
    // The request reaches DynamoDB half-way through the round trip, and is answered at the end.
    await this.clock.sleep(this.latencyMs / 2);
    const tat = this.tat;
    const result: TatUpdate =
      tat !== undefined && tat >= nowMs && tat <= latestTat
        ? { booked: true, tat: (this.tat = tat + intervalMs) }
        : { booked: false, tat };
    return this.answer(result);
  }

  async restart(nowMs: number, nextTat: number): Promise<TatUpdate> {
    await this.clock.sleep(this.latencyMs / 2);
    const tat = this.tat;
    const result: TatUpdate =
      tat === undefined || tat < nowMs
        ? { booked: true, tat: (this.tat = nextTat) }
        : { booked: false, tat };
    return this.answer(result);
  }

  private async answer(result: TatUpdate): Promise<TatUpdate> {
    this.stats.writes++;
    if (!result.booked) this.stats.refused++;
    await this.clock.sleep(this.latencyMs / 2);
    return result;
  }
}

/** One Lambda instance's budget: its own store (its own memory of `tat`) on the shared item. */
export function budgetOn(
  item: FakeTatItem,
  spec: RegistrationBudgetSpec,
  clock: VirtualClock,
): RegistrationBudget {
  return new RegistrationBudget(new TatBudgetStore(item), spec, {
    nowMs: () => clock.now().getTime(),
    sleep: (ms) => clock.sleep(ms),
  });
}
