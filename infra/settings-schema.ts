/**
 * The app's settings (`-c name=value`, or the ServiceController construct's props) as a schema, field
 * by field; settings.ts checks them in combination. Apart, so that controller-config.ts can type its
 * input without importing the checks that use it.
 */
import * as z from 'zod/mini';
import '../functions/contract/zod-messages';
import { sharedSettings } from '../functions/contract/controller-config';
import { tenantPolicySchema } from '../functions/contract/tenant-policy-config';

const list = (item: z.ZodMiniString) =>
  z._default(
    z.pipe(
      z.union([z.array(item), z.string()]),
      z.transform((value) =>
        typeof value === 'string'
          ? value
              .split(',')
              .map((part) => part.trim())
              .filter((part) => part !== '')
          : value,
      ),
    ),
    [],
  );
const matching = (pattern: RegExp, message: string) => z.string().check(z.regex(pattern, message));
/** An object from cdk.json, or the same as JSON text from `-c name='{…}'`. */
const jsonText = z.transform((value: unknown, context) => {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value) as unknown;
  } catch (error) {
    context.issues.push({
      code: 'custom',
      input: value,
      message: `not JSON (${(error as Error).message})`,
    });
    return z.NEVER;
  }
});
const integer = (min: number, max: number, fallback: number) =>
  z._default(
    z
      .pipe(
        z.union([z.int(), z.string().check(z.regex(/^\d+$/, 'a whole number'))]),
        z.transform(Number),
      )
      .check(z.gte(min), z.lte(max)),
    fallback,
  );
const flag = (fallback: boolean) =>
  z._default(
    z.pipe(
      z.union([z.boolean(), z.enum(['true', 'false'])]),
      z.transform((value) => value === true || value === 'true'),
    ),
    fallback,
  );

/**
 * The deployment's settings, from CDK context (`-c key=value` or cdk.json). Context values given on
 * the command line arrive as strings, so lists may be comma-separated and numbers and flags are
 * parsed. Validated with the same rules as the functions' own configuration.
 */
export const controllerSettingsSchema = z.object({
  clusterName: sharedSettings.clusterName,
  loadBalancerClass: sharedSettings.loadBalancerClass,
  claimClassless: flag(false),
  nodePolicy: sharedSettings.nodePolicy,
  /** The cluster VPC (subnet discovery, security groups). */
  vpcId: matching(/^vpc-([0-9a-f]{8}|[0-9a-f]{17})$/, 'a VPC ID such as vpc-0123456789abcdef0'),
  /**
   * The nodes' security groups (on EKS, the cluster security group). When given, the stack
   * creates one backend security group for all NLBs and allows it on these groups.
   */
  nodeSecurityGroupIds: list(
    matching(/^sg-([0-9a-f]{8}|[0-9a-f]{17})$/, 'a security group ID such as sg-0123456789abcdef0'),
  ),
  /**
   * The ports pods of Services with ip targets (`nlb-target-type: ip`) listen on, as `8080` or
   * `8000-8999`: the node security groups allow the backend group on them, TCP and UDP, as they
   * allow it on the NodePort range. None by default: opening every port to the NLBs would let a
   * Service's hand-written EndpointSlice reach a node's own ports (the kubelet's, say).
   */
  podTargetPorts: list(
    matching(/^([1-9]\d{0,4})(-[1-9]\d{0,4})?$/, 'a port (8080) or a range of ports (8000-8999)'),
  ),
  /** Put the functions in these subnets (private cluster endpoints); none: outside any VPC. */
  functionSubnetIds: list(
    matching(/^subnet-([0-9a-f]{8}|[0-9a-f]{17})$/, 'a subnet ID such as subnet-0123456789abcdef0'),
  ),
  /** The cluster's API endpoint and CA; when absent the functions read them with eks:DescribeCluster. */
  clusterEndpoint: z.optional(z.url({ protocol: /^https$/, error: 'an https URL' })),
  clusterCertificateAuthorityData: z.optional(z.string().check(z.minLength(1))),
  /** Self-managed clusters: a Secrets Manager secret holding a kubeconfig (instead of EKS access). */
  kubernetesSecretArn: z.optional(
    // The full ARN: IAM matches a partial one (without the six-character suffix) to nothing.
    matching(
      /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:.+-[A-Za-z0-9]{6}$/,
      "a Secrets Manager secret's full ARN, with its six-character suffix",
    ),
  ),
  /**
   * The customer-managed KMS key that encrypts that secret, if not the AWS managed one: the
   * functions may decrypt with it through Secrets Manager only.
   */
  kubernetesSecretKmsKeyArn: z.optional(
    matching(
      /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/.+$/,
      'a KMS key ARN (arn:aws:kms:…:key/…)',
    ),
  ),
  /**
   * Accept a kubeconfig in that secret whose server is plain HTTP or that sets
   * insecure-skip-tls-verify: refused by default, as the bearer token would travel in cleartext
   * or to whoever poses as the server. The functions log a Warning on each read of it.
   */
  kubernetesAllowInsecureConnection: flag(false),
  /** How the forwarder gets AWS credentials on EKS. */
  forwarderIdentity: z._default(z.enum(['pod-identity', 'irsa', 'none']), 'pod-identity'),
  oidcProviderArn: z.optional(
    matching(/^arn:aws[a-z-]*:iam::\d{12}:oidc-provider\//, 'an OIDC provider ARN'),
  ),
  oidcIssuer: z.optional(z.url()),
  /**
   * Deny sqs:SendMessage on the work and node queues to every principal but the functions' role,
   * the forwarder role the stack creates (Pod Identity, IRSA) and `queueSenderArns`: a Pod on
   * the node role can then forge neither work nor the heartbeats `ForwarderQuiet` counts.
   */
  restrictQueueSenders: flag(false),
  /**
   * With restrictQueueSenders: the other IAM roles or users (ARNs, `*` allowed) that may send,
   * such as the forwarder's own identity with forwarderIdentity=none, and operators who move
   * messages back from the DLQ (a move task sends as its caller).
   */
  queueSenderArns: list(
    matching(
      /^arn:aws[a-z-]*:iam::\d{12}:(role|user)\/.+$/,
      'an IAM role or user ARN (arn:aws:iam::123456789012:role/…), not an assumed-role session',
    ),
  ),
  nodeSyncPeriodSeconds: integer(60, 900, 100),
  sweepPeriodSeconds: integer(300, 86400, 1800),
  elbv2CallsPerSecond: integer(1, 1000, 20),
  /**
   * RegisterTargets/DeregisterTargets per second that all function instances share (ELBv2's
   * account-wide bucket refills at 4/s): lower it when other tools register targets in the
   * account; 0 leaves registrations to each process's own limiter.
   */
  registrationsPerSecond: integer(0, 4, 4),
  /** Node changes touching at most this many Services have their host updates run by node sync. */
  directHostUpdates: integer(0, 50, 5),
  defaultScheme: z._default(z.enum(['internal', 'internet-facing']), 'internal'),
  defaultTags: z._default(z.record(z.string(), z.string()), {}),
  /**
   * Lifecycle events (docs/events/): `off`, the account's `default` bus, or `create` a bus for
   * this controller. The functions may put events on that bus only.
   */
  lifecycleEventBus: z._default(z.enum(['off', 'default', 'create']), 'off'),
  /**
   * The forwarder runs its bundle from a ConfigMap on a public multi-arch Node image, so a deploy
   * needs no Docker. `linux/arm64` or `linux/amd64` builds functions/forwarder/Dockerfile for that
   * platform instead and pushes it with the stack's assets (Docker needed), for clusters that may
   * pull only from their own account.
   */
  forwarderImageBuild: z._default(z.enum(['none', 'linux/arm64', 'linux/amd64']), 'none'),
  /**
   * What each namespace may ask for (docs/tenant-safety.md#tenant-policy): an object in cdk.json,
   * or JSON text on the command line.
   */
  tenantPolicy: z.optional(z.pipe(jsonText, tenantPolicySchema)),
  /** An SNS topic the alarms notify. */
  alarmTopicArn: z.optional(matching(/^arn:aws[a-z-]*:sns:/, 'an SNS topic ARN')),
});

export type ControllerSettings = z.infer<typeof controllerSettingsSchema>;

export const settingNames = Object.keys(controllerSettingsSchema.shape);
