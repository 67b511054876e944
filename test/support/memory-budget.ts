import {
  RegistrationBudget,
  TatBudgetStore,
  type TatItem,
} from '../../functions/aws/registration-budget';
import {
  applyBudgetWrite,
  type BudgetWrite,
  type RegistrationBudgetSpec,
  type TatUpdate,
} from '../../functions/core/registration-slots';

/** A budget item's conditional writes as DynamoDB applies them (atomically, one at a time). */
export class MemoryTatItem implements TatItem {
  values: Record<string, number | undefined> = {};
  writes = 0;
  get tat(): number | undefined {
    return this.values.tat;
  }
  set tat(tat: number | undefined) {
    this.values = { ...this.values, tat };
  }
  write(write: BudgetWrite): Promise<TatUpdate> {
    this.writes++;
    const applied = applyBudgetWrite(this.values, write);
    this.values = { ...applied.item };
    return Promise.resolve(applied.update);
  }
}

/**
 * A budget on `item` whose clock is `now` (advanced by its sleeps, each recorded in `waits`), with
 * the work queue's batching window as createRuntime gives it.
 */
export function memoryBudget(
  spec: RegistrationBudgetSpec,
  now: { ms: number },
  options: { item?: MemoryTatItem; perNamespace?: boolean; name?: string } = {},
) {
  const item = options.item ?? new MemoryTatItem();
  const waits: number[] = [];
  const budget = new RegistrationBudget(
    new TatBudgetStore(item, () => now.ms),
    spec,
    {
      nowMs: () => now.ms,
      sleep: (ms) => {
        waits.push(ms);
        now.ms += ms;
        return Promise.resolve();
      },
    },
    {
      perNamespace: options.perNamespace ?? true,
      ...(options.name === undefined ? {} : { name: options.name }),
    },
  );
  return { budget, waits, item };
}
