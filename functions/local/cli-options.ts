import { readFileSync } from 'node:fs';
import type { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import {
  controllerConfigSchema,
  parseConfig,
  type ControllerConfig,
} from '../contract/controller-config';
import { tenantPolicySchema, type TenantPolicySetting } from '../contract/tenant-policy-config';
import type { AwsAccess } from './aws-resources';
import { UsageError } from './cli-usage';

// The CLI's options and the controller configuration they make, each checked before a command
// starts anything (issue 35: nothing is created on options that turn out wrong).

export const options = {
  help: { type: 'boolean', short: 'h' },
  kubeconfig: { type: 'string' },
  embedded: { type: 'boolean' },
  'allow-insecure-connection': { type: 'boolean' },
  rbac: { type: 'boolean' },
  'cluster-name': { type: 'string' },
  region: { type: 'string' },
  'vpc-id': { type: 'string' },
  'backend-security-group-id': { type: 'string' },
  'queue-name': { type: 'string' },
  'table-name': { type: 'string' },
  'load-balancer-class': { type: 'string' },
  'claim-classless': { type: 'boolean' },
  'node-policy': { type: 'string' },
  'tenant-policy': { type: 'string' },
  'create-resources': { type: 'boolean' },
  'lease-seconds': { type: 'string' },
  'until-converged': { type: 'boolean' },
  timeout: { type: 'string' },
  yes: { type: 'boolean' },
  file: { type: 'string', short: 'f' },
} as const;

export type Flags = ReturnType<
  typeof parseArgs<{ options: typeof options; allowPositionals: true }>
>['values'];

export function setting(flags: Flags, flag: keyof Flags, env: string): string | undefined {
  const value = flags[flag];
  if (typeof value === 'string') return value;
  if (value === true) return 'true';
  return process.env[env] || undefined;
}

/**
 * A real cluster only when the command line names it: a KUBECONFIG exported in the shell (most
 * engineers' machines have one) must not turn a try-out into managing production (issue 35).
 */
export function explicitKubeconfig(flags: Flags): string | undefined {
  return typeof flags.kubeconfig === 'string' && flags.kubeconfig !== ''
    ? flags.kubeconfig
    : undefined;
}

/** A real cluster's kubeconfig must name a current context before anything is created. */
export function readableKubeconfig(path: string): void {
  const kc = new KubeConfig();
  try {
    kc.loadFromFile(path);
  } catch (error) {
    throw new UsageError(
      `--kubeconfig ${path}: not a readable kubeconfig (${(error as Error).message})`,
    );
  }
  if (kc.getCurrentCluster() === null) {
    throw new UsageError(`--kubeconfig ${path}: no current context names a cluster`);
  }
}

/**
 * The controller configuration, checked before anything is created or started: the queue and
 * table do not exist yet, so their places are held by well-formed stand-ins.
 */
export function checkConfiguration(
  flags: Flags,
  aws: AwsAccess,
  names: { queueName: string; tableName: string },
  kubeconfig: string,
  defaults: { clusterName?: string; vpcId?: string; backendSecurityGroupId?: string },
): void {
  const standIn = {
    queueUrl: `https://sqs.${aws.region}.amazonaws.com/000000000000/${names.queueName}`,
    tableName: names.tableName,
  };
  try {
    controllerConfig(flags, aws, standIn, kubeconfig, defaults);
  } catch (error) {
    throw new UsageError(
      `${(error as Error).message}\nNothing was created: fix the options above and run again.`,
    );
  }
}

export function controllerConfig(
  flags: Flags,
  aws: AwsAccess,
  resources: { queueUrl: string; tableName: string; deadLetterQueueUrl?: string },
  kubeconfig: string,
  defaults: { clusterName?: string; vpcId?: string; backendSecurityGroupId?: string },
): ControllerConfig {
  const endpoints = aws.endpoint
    ? Object.fromEntries(
        ['elbv2', 'ec2', 'tagging', 'sqs', 'dynamodb', 'sts', 'secretsManager', 'eks'].map((k) => [
          k,
          aws.endpoint,
        ]),
      )
    : {};
  const backend =
    setting(flags, 'backend-security-group-id', 'SSC_BACKEND_SECURITY_GROUP_ID') ??
    defaults.backendSecurityGroupId;
  const lbClass = setting(flags, 'load-balancer-class', 'SSC_LOAD_BALANCER_CLASS');
  const nodePolicy = setting(flags, 'node-policy', 'SSC_NODE_POLICY');
  const tenantPolicy = readTenantPolicy(flags);
  const leaseSeconds = readLeaseSeconds(flags);
  return parseConfig({
    clusterName: setting(flags, 'cluster-name', 'SSC_CLUSTER_NAME') ?? defaults.clusterName,
    region: aws.region,
    ...(lbClass ? { loadBalancerClass: lbClass } : {}),
    claimClassless: setting(flags, 'claim-classless', 'SSC_CLAIM_CLASSLESS') === 'true',
    ...(nodePolicy ? { nodePolicy } : {}),
    queueUrl: resources.queueUrl,
    tableName: resources.tableName,
    ...(resources.deadLetterQueueUrl ? { deadLetterQueueUrl: resources.deadLetterQueueUrl } : {}),
    ...(leaseSeconds !== undefined ? { leaseSeconds } : {}),
    aws: {
      vpcId: setting(flags, 'vpc-id', 'SSC_VPC_ID') ?? defaults.vpcId,
      ...(backend ? { backendSecurityGroupId: backend } : {}),
      endpoints,
    },
    kubernetes: {
      mode: 'kubeconfig',
      path: kubeconfig,
      ...(setting(flags, 'allow-insecure-connection', 'SSC_ALLOW_INSECURE_CONNECTION') === 'true'
        ? { allowInsecureConnection: true }
        : {}),
    },
    ...(tenantPolicy ? { tenantPolicy } : {}),
  });
}

/** The --tenant-policy file, checked as the controller will check it, before anything starts. */
export function readTenantPolicy(flags: Flags): TenantPolicySetting | undefined {
  const path = setting(flags, 'tenant-policy', 'SSC_TENANT_POLICY');
  if (path === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new UsageError(
      `--tenant-policy ${path}: not a readable JSON file (${(error as Error).message})`,
    );
  }
  const result = tenantPolicySchema.safeParse(parsed);
  if (result.success) return result.data;
  const problems = result.error.issues.map(
    (issue) => `  - ${['tenantPolicy', ...issue.path].join('.')}: ${issue.message}`,
  );
  throw new UsageError(`--tenant-policy ${path}: invalid tenant policy:\n${problems.join('\n')}`);
}

/** --lease-seconds, checked by the configuration's own rule before anything starts. */
export function readLeaseSeconds(flags: Flags): number | undefined {
  const text = setting(flags, 'lease-seconds', 'SSC_LEASE_SECONDS');
  if (text === undefined) return undefined;
  const result = controllerConfigSchema.shape.leaseSeconds.safeParse(Number(text));
  if (result.success) return result.data;
  throw new UsageError(
    `--lease-seconds ${text}: ${result.error.issues.map((i) => i.message).join('; ')}`,
  );
}
