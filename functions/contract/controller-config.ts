import * as z from 'zod/mini';
import './zod-messages';
import { tagProblems } from '../nlb/model/tag-rules';
import { defaultLoadBalancerClass } from '../core/claim';
import { tenantPolicySchema } from './tenant-policy-config';

/**
 * The one configuration object of the controller, shared by the functions and the forwarder.
 * Read from the CONTROLLER_CONFIG environment variable (JSON) at the edge, validated here; a bad
 * configuration stops startup with an error that names every problem. zod's tree-shakable "mini"
 * form: the full one adds about 9 MiB of resident memory to the forwarder for the same checks.
 */
const url = z.url();
const optionalUrl = z.optional(url);
const nonEmpty = z.string().check(z.minLength(1));
const intIn = (min: number, max: number) => z.int().check(z.gte(min), z.lte(max));
const matching = (pattern: RegExp, message?: string) => z.string().check(z.regex(pattern, message));

const allowedTags = z.superRefine((tags: Record<string, string>, ctx) => {
  for (const message of tagProblems(new Map(Object.entries(tags)))) {
    ctx.addIssue({ code: 'custom', message, input: tags });
  }
});

const endpoints = z._default(
  z.strictObject({
    elbv2: optionalUrl,
    ec2: optionalUrl,
    tagging: optionalUrl,
    sqs: optionalUrl,
    dynamodb: optionalUrl,
    sts: optionalUrl,
    secretsManager: optionalUrl,
    eks: optionalUrl,
    events: optionalUrl,
  }),
  {},
);

const kubernetes = z.discriminatedUnion('mode', [
  z.strictObject({
    mode: z.literal('eks'),
    /** The EKS cluster name (what the token's x-k8s-aws-id carries). */
    clusterName: nonEmpty,
    /** With the CA below; when either is absent both are read once per instance (eks:DescribeCluster). */
    endpoint: z.optional(z.url({ protocol: /^https$/, error: 'an https URL' })),
    /** Base64 PEM of the cluster CA, as `aws eks describe-cluster` prints it. */
    certificateAuthorityData: z.optional(nonEmpty),
  }),
  z.strictObject({
    mode: z.literal('secret'),
    secretArn: matching(/^arn:aws[a-z-]*:secretsmanager:/),
    /**
     * Accept a kubeconfig whose server is plain HTTP or that sets insecure-skip-tls-verify (with a
     * Warning in the logs); refused when absent (docs/tenant-safety.md#cluster-credentials).
     */
    allowInsecureConnection: z.optional(z.boolean()),
  }),
  z.strictObject({
    mode: z.literal('kubeconfig'),
    /** Path of a kubeconfig file; the default loading rules when absent. */
    path: z.optional(nonEmpty),
    /** As for `secret`; a server on this machine (the embedded fake API server) needs none. */
    allowInsecureConnection: z.optional(z.boolean()),
  }),
]);

/** The settings every part of the controller reads, the forwarder included. */
export const sharedSettings = {
  /** Names this controller's resources and tags; unique per cluster in an account. */
  clusterName: matching(
    /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/,
    'letters, digits, "_", "." and "-", at most 100',
  ),
  region: matching(/^[a-z]{2}(-[a-z]+)+-\d$/, 'an AWS Region such as us-east-1'),
  loadBalancerClass: z._default(
    matching(/^[a-z0-9.-]+\/[A-Za-z0-9._-]+$/, 'a domain-prefixed name such as example.com/nlb'),
    defaultLoadBalancerClass,
  ),
  /** Also serve Services without a class (self-managed clusters without a built-in controller). */
  claimClassless: z._default(z.boolean(), false),
  nodePolicy: z._default(z.enum(['stable', 'seed']), 'stable'),
  queueUrl: url,
  /**
   * The node queue: node changes and the node-sync timer's ticks, consumed by the node-sync
   * function, so a Service backlog on the work queue never delays node sync. Without it (local
   * mode, configurations of release 0.1) node messages share the work queue.
   */
  nodeQueueUrl: optionalUrl,
};

export const controllerConfigSchema = z.strictObject({
  ...sharedSettings,
  tableName: z.string().check(z.minLength(3), z.maxLength(255)),
  /** Where messages that are not ours go, for inspection; dropped (logged, counted) without it. */
  deadLetterQueueUrl: optionalUrl,
  // At most SQS's longest message delay: the period is a chain of delayed messages.
  nodeSyncPeriodSeconds: z._default(intIn(60, 900), 100),
  /**
   * Node messages (other than the timer's) within this long of the last node-sync pass wait for
   * it to pass and share one pass: a flood of them costs one Node list per interval. 0: no limit.
   */
  nodeSyncMinIntervalSeconds: z._default(intIn(0, 300), 10),
  /**
   * When a node change affects at most this many Services, node sync runs their host updates
   * itself (one queue hop from the change to the NLB); more go through the work queue, spread over
   * its workers. 0: always the work queue.
   */
  directHostUpdates: z._default(intIn(0, 50), 5),
  sweepPeriodSeconds: z._default(intIn(300, 86400), 1800),
  backoffBaseSeconds: z._default(intIn(1, 60), 5),
  backoffMaxSeconds: z._default(intIn(1, 900), 300),
  /** How long a sync may hold a key; longer than the function timeout. */
  leaseSeconds: z._default(intIn(10, 900), 120),
  /** ELBv2 calls per second this controller may spend; sets the work queue's concurrency. */
  elbv2CallsPerSecond: z._default(intIn(1, 1000), 20),
  /**
   * RegisterTargets/DeregisterTargets per second and burst that all instances share (ELBv2's
   * account-wide bucket); absent: 4/s, burst 10. Lower it when other tools register targets in the
   * same account and Region. perSecond 0 leaves registrations to the per-process limiter alone.
   */
  registrationBudget: z.optional(
    z.strictObject({
      perSecond: z.number().check(z.gte(0), z.lte(1000)),
      burst: z._default(intIn(1, 1000), 10),
    }),
  ),
  /**
   * The same for ELBv2 Describe* calls within a Service's sync; absent: 10/s, burst 20
   * (`defaultDescribeBudget`); perSecond 0: off (each process's own limit). AWS's bucket: 10/s,
   * burst 40.
   */
  describeBudget: z.optional(
    z.strictObject({
      perSecond: z.number().check(z.gte(0), z.lte(1000)),
      burst: z._default(intIn(1, 1000), 20),
    }),
  ),
  /**
   * The same for every other ELBv2 call within a Service's sync (Create*, Modify*, Delete*, Set*,
   * tags); absent: 3/s, burst 10 (`defaultChangeBudget`); perSecond 0: off. AWS's bucket: 3/s,
   * burst 20.
   */
  changeBudget: z.optional(
    z.strictObject({
      perSecond: z.number().check(z.gte(0), z.lte(1000)),
      burst: z._default(intIn(1, 1000), 10),
    }),
  ),
  /** How long orphaned resources (no Service, no state) are left alone before the sweep deletes them. */
  orphanGraceSeconds: z._default(z.int().check(z.gte(0)), 900),
  aws: z.strictObject({
    vpcId: matching(/^vpc-[0-9a-f]+$/),
    backendSecurityGroupId: z.optional(matching(/^sg-[0-9a-f]+$/)),
    defaultScheme: z._default(z.enum(['internal', 'internet-facing']), 'internal'),
    defaultSslPolicy: z._default(nonEmpty, 'ELBSecurityPolicy-TLS13-1-2-2021-06'),
    /** Refused when reserved or too many (nlb/model/tag-rules.ts): they go on every resource. */
    defaultTags: z._default(z.record(z.string(), z.string()).check(allowedTags), {}),
    endpoints,
  }),
  kubernetes,
  /** What each namespace may ask for (docs/tenant-safety.md#tenant-policy); no limits when absent. */
  tenantPolicy: z.optional(tenantPolicySchema),
  /** Lifecycle events on EventBridge (docs/events/); off when absent. */
  lifecycleEvents: z.optional(
    z.strictObject({
      /** A bus name or ARN; `default` for the account's default bus. */
      busName: matching(
        /^(default|[A-Za-z0-9._\-/]{1,256}|arn:aws[a-z-]*:events:[a-z0-9-]+:\d{12}:event-bus\/[A-Za-z0-9._\-/]+)$/,
        'an event bus name or ARN',
      ),
    }),
  ),
});

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
