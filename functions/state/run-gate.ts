import type { RunGate } from '../runtime/ports';

/**
 * Node sync's minimum interval as a condition of the write that takes its lease: the last run
 * ended at least `minIntervalMs` ago (or never), or a trigger is the current chain's tick.
 */
export function runGateCondition(
  gate: RunGate,
  nowMs: number,
): { readonly condition: string; readonly values: Record<string, number | string> } {
  const chains = gate.chains.map((_, i) => `:chain${i}`);
  return {
    condition: `(attribute_not_exists(lastRunAtMs) OR lastRunAtMs <= :latestRun${chains.length > 0 ? ` OR chain IN (${chains.join(', ')})` : ''})`,
    values: {
      ':latestRun': nowMs - gate.minIntervalMs,
      ...Object.fromEntries(gate.chains.map((chain, i) => [`:chain${i}`, chain])),
    },
  };
}

/**
 * When a refused gated acquire may run (epoch ms), from the item the refusal returned (raw
 * attribute values: the document client does not unmarshall it); undefined when the gate let
 * it through and the lease itself was what refused it.
 */
export function tooSoonUntil(
  item: Record<string, { N?: string; S?: string } | undefined> | undefined,
  gate: RunGate,
  nowMs: number,
): number | undefined {
  const lastRun = item?.lastRunAtMs?.N;
  if (lastRun === undefined) return undefined;
  const chain = item?.chain?.S;
  if (chain !== undefined && gate.chains.includes(chain)) return undefined;
  const dueAtMs = Number(lastRun) + gate.minIntervalMs;
  return dueAtMs > nowMs ? dueAtMs : undefined;
}
