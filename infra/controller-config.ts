import type * as z from 'zod/mini';
import type { controllerConfigSchema } from '../functions/contract/controller-config';
import type { ControllerSettings } from './settings-schema';

/** How long one sync may run (the functions' timeout). */
export const syncTimeoutSeconds = 60;
/** The key's lease outlasts one sync. */
export const leaseSeconds = syncTimeoutSeconds * 2;

/** What the stack creates that the functions' configuration names (CloudFormation tokens there). */
export interface ControllerResources {
  readonly region: string;
  readonly queueUrl: string;
  /** Node changes and the node-sync timer, consumed by node-sync apart from the Service work. */
  readonly nodeQueueUrl: string;
  readonly deadLetterQueueUrl: string;
  readonly tableName: string;
  readonly backendSecurityGroupId?: string | undefined;
  readonly eventBusName?: string | undefined;
  readonly leaseSeconds: number;
}

/**
 * CONTROLLER_CONFIG as written: the schema's input, so what is left out takes the functions' own
 * default (functions/contract/controller-config.ts).
 */
export type ControllerConfigInput = z.input<typeof controllerConfigSchema>;

/** The functions' configuration (CONTROLLER_CONFIG) for these settings and resources. */
export function controllerConfigFor(
  settings: ControllerSettings,
  resources: ControllerResources,
): ControllerConfigInput {
  return {
    clusterName: settings.clusterName,
    region: resources.region,
    loadBalancerClass: settings.loadBalancerClass,
    claimClassless: settings.claimClassless,
    nodePolicy: settings.nodePolicy,
    queueUrl: resources.queueUrl,
    nodeQueueUrl: resources.nodeQueueUrl,
    tableName: resources.tableName,
    deadLetterQueueUrl: resources.deadLetterQueueUrl,
    nodeSyncPeriodSeconds: settings.nodeSyncPeriodSeconds,
    nodeSyncMinIntervalSeconds: 10,
    sweepPeriodSeconds: settings.sweepPeriodSeconds,
    backoffBaseSeconds: 5,
    backoffMaxSeconds: 300,
    leaseSeconds: resources.leaseSeconds,
    elbv2CallsPerSecond: settings.elbv2CallsPerSecond,
    directHostUpdates: settings.directHostUpdates,
    registrationBudget: { perSecond: settings.registrationsPerSecond, burst: 10 },
    orphanGraceSeconds: 900,
    aws: {
      vpcId: settings.vpcId,
      ...(resources.backendSecurityGroupId !== undefined
        ? { backendSecurityGroupId: resources.backendSecurityGroupId }
        : {}),
      defaultScheme: settings.defaultScheme,
      defaultSslPolicy: 'ELBSecurityPolicy-TLS13-1-2-2021-06',
      defaultTags: settings.defaultTags,
      endpoints: {},
    },
    kubernetes:
      settings.kubernetesSecretArn !== undefined
        ? {
            mode: 'secret',
            secretArn: settings.kubernetesSecretArn,
            ...(settings.kubernetesAllowInsecureConnection
              ? { allowInsecureConnection: true }
              : {}),
          }
        : {
            mode: 'eks',
            clusterName: settings.clusterName,
            ...(settings.clusterEndpoint !== undefined &&
            settings.clusterCertificateAuthorityData !== undefined
              ? {
                  endpoint: settings.clusterEndpoint,
                  certificateAuthorityData: settings.clusterCertificateAuthorityData,
                }
              : {}),
          },
    ...(resources.eventBusName !== undefined
      ? { lifecycleEvents: { busName: resources.eventBusName } }
      : {}),
    ...(settings.tenantPolicy !== undefined ? { tenantPolicy: settings.tenantPolicy } : {}),
  };
}

/**
 * Lambda allows 4 KB of environment variables per function, names and values together; the
 * configuration is the only large one. The rest is left for what Lambda and CDK add.
 */
export const environmentLimitBytes = 4096;
const reservedBytes = 256;

/**
 * How long CONTROLLER_CONFIG can get once deployed, with each value the stack fills in at deploy
 * time at its longest: queue URLs and generated names up to 128 characters.
 */
export function longestConfigBytes(settings: ControllerSettings): number {
  const long = 'x'.repeat(128);
  const config = controllerConfigFor(settings, {
    region: 'ap-southeast-4',
    queueUrl: long,
    nodeQueueUrl: long,
    deadLetterQueueUrl: long,
    tableName: long,
    backendSecurityGroupId: 'sg-0123456789abcdef0',
    ...(settings.lifecycleEventBus !== 'off' ? { eventBusName: long } : {}),
    leaseSeconds,
  });
  return 'CONTROLLER_CONFIG'.length + Buffer.byteLength(JSON.stringify(config));
}

/** The problem with the settings' configuration size, if it may not fit. */
export function environmentSizeProblem(settings: ControllerSettings): string | undefined {
  const bytes = longestConfigBytes(settings);
  if (bytes <= environmentLimitBytes - reservedBytes) return undefined;
  return `the functions' configuration may reach ${bytes} bytes, over Lambda's ${environmentLimitBytes}-byte environment limit (less ${reservedBytes} kept for Lambda's own): shorten defaultTags or tenantPolicy (namespace patterns and label selectors group many namespaces in one rule), or leave out clusterEndpoint and clusterCertificateAuthorityData (the functions then read them with eks:DescribeCluster)`;
}
