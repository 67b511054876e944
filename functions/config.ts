import { z } from 'zod';
import { defaultLoadBalancerClass } from './core/claim';

/**
 * The one configuration object of the controller, shared by the functions and the forwarder.
 * Read from the CONTROLLER_CONFIG environment variable (JSON) at the edge, validated here; a bad
 * configuration stops startup with an error that names every problem.
 */
const endpoints = z
  .object({
    elbv2: z.url().optional(),
    ec2: z.url().optional(),
    tagging: z.url().optional(),
    sqs: z.url().optional(),
    dynamodb: z.url().optional(),
    sts: z.url().optional(),
    secretsManager: z.url().optional(),
  })
  .strict()
  .default({});

const kubernetes = z.discriminatedUnion('mode', [
  z
    .object({
      mode: z.literal('eks'),
      /** The EKS cluster name (what the token's x-k8s-aws-id carries). */
      clusterName: z.string().min(1),
      endpoint: z.url(),
      /** Base64 PEM of the cluster CA, as `aws eks describe-cluster` prints it. */
      certificateAuthorityData: z.string().min(1),
    })
    .strict(),
  z
    .object({
      mode: z.literal('secret'),
      secretArn: z.string().regex(/^arn:aws[a-z-]*:secretsmanager:/),
    })
    .strict(),
  z
    .object({
      mode: z.literal('kubeconfig'),
      /** Path of a kubeconfig file; the default loading rules when absent. */
      path: z.string().min(1).optional(),
    })
    .strict(),
]);

export const controllerConfigSchema = z
  .object({
    /** Names this controller's resources and tags; unique per cluster in an account. */
    clusterName: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/, 'letters, digits, "_", "." and "-", at most 100'),
    region: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/, 'an AWS Region such as us-east-1'),
    loadBalancerClass: z
      .string()
      .regex(/^[a-z0-9.-]+\/[A-Za-z0-9._-]+$/, 'a domain-prefixed name such as example.com/nlb')
      .default(defaultLoadBalancerClass),
    /** Also serve Services without a class (self-managed clusters without a built-in controller). */
    claimClassless: z.boolean().default(false),
    nodePolicy: z.enum(['stable', 'seed']).default('stable'),
    queueUrl: z.url(),
    tableName: z.string().min(3).max(255),
    // At most SQS's longest message delay: the period is a chain of delayed messages.
    nodeSyncPeriodSeconds: z.int().min(60).max(900).default(100),
    sweepPeriodSeconds: z.int().min(300).max(86400).default(1800),
    backoffBaseSeconds: z.int().min(1).max(60).default(5),
    backoffMaxSeconds: z.int().min(1).max(900).default(300),
    /** How long a sync may hold a key; longer than the function timeout. */
    leaseSeconds: z.int().min(10).max(900).default(120),
    /** ELBv2 calls per second this controller may spend; sets the work queue's concurrency. */
    elbv2CallsPerSecond: z.int().min(1).max(1000).default(20),
    /** How long orphaned resources (no Service, no state) are left alone before the sweep deletes them. */
    orphanGraceSeconds: z.int().min(0).default(900),
    aws: z
      .object({
        vpcId: z.string().regex(/^vpc-[0-9a-f]+$/),
        backendSecurityGroupId: z
          .string()
          .regex(/^sg-[0-9a-f]+$/)
          .optional(),
        defaultScheme: z.enum(['internal', 'internet-facing']).default('internal'),
        defaultSslPolicy: z.string().min(1).default('ELBSecurityPolicy-TLS13-1-2-2021-06'),
        defaultTags: z.record(z.string(), z.string()).default({}),
        endpoints,
      })
      .strict(),
    kubernetes,
  })
  .strict();

export type ControllerConfig = z.infer<typeof controllerConfigSchema>;

export class ConfigurationError extends Error {
  override readonly name = 'ConfigurationError';
}

/** Parses configuration; throws one ConfigurationError listing every bad or missing setting. */
export function parseConfig(input: unknown): ControllerConfig {
  const result = controllerConfigSchema.safeParse(input);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const path = issue.path.length > 0 ? issue.path.join('.') : '(root)';
    return `  - ${path}: ${issue.message}`;
  });
  throw new ConfigurationError(`invalid controller configuration:\n${problems.join('\n')}`);
}

/** Reads CONTROLLER_CONFIG (JSON) from an environment; the only place that touches it. */
export function configFromEnvironment(
  env: Readonly<Record<string, string | undefined>>,
): ControllerConfig {
  const text = env.CONTROLLER_CONFIG;
  if (text === undefined || text.trim() === '') {
    throw new ConfigurationError(
      'invalid controller configuration:\n  - CONTROLLER_CONFIG: not set (a JSON object)',
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new ConfigurationError(
      `invalid controller configuration:\n  - CONTROLLER_CONFIG: not JSON (${(error as Error).message})`,
    );
  }
  return parseConfig(parsed);
}
