import { z } from 'zod';
import { ConfigurationError, controllerConfigSchema } from '../config';

/**
 * The forwarder reads the same CONTROLLER_CONFIG as the functions (so class, finalizer mode and
 * node policy cannot drift apart) and uses only what it needs; the rest may be absent here.
 */
export const forwarderConfigSchema = controllerConfigSchema
  .pick({
    clusterName: true,
    region: true,
    loadBalancerClass: true,
    claimClassless: true,
    nodePolicy: true,
    queueUrl: true,
  })
  .extend({
    /** SQS endpoint override (emulators, VPC endpoints). */
    sqsEndpoint: z.url().optional(),
    /** Port of /healthz, /readyz and /metrics. */
    port: z.int().min(0).max(65535).default(8080),
    /** Distinct pending keys before the watch waits for the queue. */
    bufferCapacity: z.int().min(10).max(1_000_000).default(10_000),
  })
  .strip();

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
