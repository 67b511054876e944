import { runtimeFromEnvironment } from '../wiring/runtime-instance';
import { runSweep, type SweepReport } from '../runtime/sweep';
import { flushMetrics } from '../wiring/wiring';

/** The periodic sweep: drift repair, re-drive, orphan cleanup (see runtime/sweep.ts). */
export async function handler(): Promise<SweepReport> {
  try {
    return await runSweep(runtimeFromEnvironment());
  } finally {
    flushMetrics();
  }
}
