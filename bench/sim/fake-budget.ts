/**
 * The registration budget's DynamoDB item on virtual time: DynamoTatItem's conditional writes
 * applied with the same conditions (core/registration-slots.ts, `applyBudgetWrite`), each after
 * one state-table latency, counted as the writes (1 WRU each) they would be. The controller's own
 * TatBudgetStore and RegistrationBudget run on top of it unchanged.
 */
import {
  RegistrationBudget,
  registrationScope,
  TatBudgetStore,
  type TatItem,
} from '../../functions/aws/registration-budget';
import {
  applyBudgetWrite,
  type BudgetWrite,
  type RegistrationBudgetSpec,
  type TatUpdate,
} from '../../functions/core/registration-slots';
import type { BudgetItemAttributes } from '../../functions/core/registration-slots';
import type { LambdaMeter } from './meter';
import type { VirtualClock } from './virtual-clock';

export interface BudgetItemStats {
  /** Conditional UpdateItem requests (each a write unit, refused or not). */
  writes: number;
  /** Of those, refused by their condition. */
  refused: number;
  /** Virtual ms each namespace's calls spent waiting on the budget (slots and turns behind others). */
  readonly waitMsByNamespace: Map<string, number>;
}

export class FakeTatItem implements TatItem {
  readonly stats: BudgetItemStats = { writes: 0, refused: 0, waitMsByNamespace: new Map() };
  private item: BudgetItemAttributes = {};

  constructor(
    private readonly clock: VirtualClock,
    private readonly latencyMs: number,
    private readonly meter?: LambdaMeter,
  ) {}

  write(write: BudgetWrite): Promise<TatUpdate> {
    const roundTrip = async () => {
      // The request reaches DynamoDB half-way through the round trip, and is answered at the end.
      await this.clock.sleep(this.latencyMs / 2);
      const applied = applyBudgetWrite(this.item, write);
      this.item = applied.item;
      this.stats.writes++;
      if (!applied.update.booked) this.stats.refused++;
      await this.clock.sleep(this.latencyMs / 2);
      return applied.update;
    };
    return this.meter === undefined ? roundTrip() : this.meter.call(roundTrip);
  }
}

/** One Lambda instance's budget: its own store (its own memory of `tat`) on the shared item. */
export function budgetOn(
  item: FakeTatItem,
  spec: RegistrationBudgetSpec,
  clock: VirtualClock,
  /** false: first come, first served (the budget before issue 32). */
  perNamespace = true,
  /** Which of the fleet's budgets it is, for its messages. */
  name = 'ELBv2 registration budget',
): RegistrationBudget {
  return new RegistrationBudget(
    new TatBudgetStore(item, () => clock.now().getTime()),
    spec,
    {
      nowMs: () => clock.now().getTime(),
      sleep: (ms) => {
        const namespace = registrationScope.getStore()?.namespace ?? '';
        const waits = item.stats.waitMsByNamespace;
        waits.set(namespace, (waits.get(namespace) ?? 0) + ms);
        return clock.sleep(ms);
      },
    },
    // As createRuntime builds it: the work queue's batching window before a kept slot.
    { perNamespace, name },
  );
}
