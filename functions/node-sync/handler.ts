import { scheduleTick } from '../runtime/node-sync';
import { runtimeFromEnvironment } from '../runtime/runtime-instance';
import { flushMetrics } from '../runtime/wiring';

/** The one-minute schedule: keeps the node-sync timer chain alive (see runtime/node-sync.ts). */
export async function handler(): Promise<{ chain: string }> {
  try {
    return { chain: await scheduleTick(runtimeFromEnvironment()) };
  } finally {
    flushMetrics();
  }
}
