import * as z from 'zod/mini';
import '../contract/zod-messages';
import { ConfigurationError, sharedSettings } from '../contract/controller-config';

/**
 * The forwarder reads the same CONTROLLER_CONFIG as the functions (so class, finalizer mode and
 * node policy cannot drift apart) and uses only what it needs; the rest may be absent here.
 */
export const forwarderConfigSchema = z.object({
  ...sharedSettings,
  /** SQS endpoint override (emulators, VPC endpoints). */
  sqsEndpoint: z.optional(z.url()),
  /** Port of /healthz, /readyz and /metrics. */
  port: z._default(z.int().check(z.gte(0), z.lte(65535)), 8080),
  /** Distinct pending keys before the watch waits for the queue. */
  bufferCapacity: z._default(z.int().check(z.gte(10), z.lte(1_000_000)), 10_000),
  /** Seconds between heartbeats to the work queue (the functions alarm when they stop). */
  heartbeatSeconds: z._default(z.int().check(z.gte(10), z.lte(900)), 60),
  /** Seconds of failed sends after which /healthz fails, so the kubelet restarts the pod. */
  unhealthyAfterSeconds: z._default(z.int().check(z.gte(30), z.lte(3600)), 300),
  /**
   * Failed lists or watches of one resource in a row (no list completed, no watch opened between)
   * after which /healthz fails. 20 is about 4 to 8 minutes of the watch's capped backoff.
   */
  unhealthyAfterWatchFailures: z._default(z.int().check(z.gte(1), z.lte(10_000)), 20),
});

export type ForwarderConfig = z.infer<typeof forwarderConfigSchema>;

export function forwarderConfigFromEnvironment(
  env: Readonly<Record<string, string | undefined>>,
): ForwarderConfig {
  const text = env.CONTROLLER_CONFIG;
  if (text === undefined || text.trim() === '') {
    throw new ConfigurationError(
      'invalid forwarder configuration:\n  - CONTROLLER_CONFIG: not set (a JSON object)',
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new ConfigurationError(
      `invalid forwarder configuration:\n  - CONTROLLER_CONFIG: not JSON (${(error as Error).message})`,
    );
  }
  const result = forwarderConfigSchema.safeParse(parsed);
  if (result.success) return result.data;
  const problems = result.error.issues.map(
    (issue) => `  - ${issue.path.join('.') || '(root)'}: ${issue.message}`,
  );
  throw new ConfigurationError(`invalid forwarder configuration:\n${problems.join('\n')}`);
}
