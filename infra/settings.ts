import { createHash } from 'node:crypto';
import { tagProblems } from '../functions/nlb/model/tag-rules';
import { environmentSizeProblem } from './controller-config';
import { controllerSettingsSchema, settingNames, type ControllerSettings } from './settings-schema';

/** Reads the settings from a context lookup; throws one error naming every bad or missing one. */
export function settingsFromContext(tryGetContext: (key: string) => unknown): ControllerSettings {
  const raw: Record<string, unknown> = {};
  for (const name of settingNames) {
    const value = tryGetContext(name);
    if (value !== undefined) raw[name] = value;
  }
  return validatedSettings(raw, 'invalid settings (give them with -c name=value)');
}

/**
 * The settings from raw values (context strings, or the typed values of the ServiceController
 * construct's props), checked field by field and in combination; throws one error, headed by
 * `heading`, naming every bad or missing one.
 */
export function validatedSettings(
  raw: Readonly<Record<string, unknown>>,
  heading: string,
): ControllerSettings {
  const values = { ...raw };
  // Self-managed clusters have no Pod Identity: default the forwarder to a policy to attach.
  if (values.kubernetesSecretArn !== undefined && values.forwarderIdentity === undefined) {
    values.forwarderIdentity = 'none';
  }
  const result = controllerSettingsSchema.safeParse(values);
  const problems = result.success
    ? combinationProblems(result.data)
    : result.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`);
  if (result.success && problems.length === 0) return result.data;
  throw new Error(`${heading}:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
}

/** What synth would accept but a deploy would refuse, or what cannot work together. */
function combinationProblems(settings: ControllerSettings): string[] {
  const problems: string[] = [];
  if (
    (settings.clusterEndpoint === undefined) !==
    (settings.clusterCertificateAuthorityData === undefined)
  ) {
    problems.push('clusterEndpoint, clusterCertificateAuthorityData: give both or neither');
  }
  if (
    settings.forwarderIdentity === 'irsa' &&
    (settings.oidcProviderArn === undefined || settings.oidcIssuer === undefined)
  ) {
    problems.push('oidcProviderArn, oidcIssuer: both required with forwarderIdentity=irsa');
  }
  if (
    settings.kubernetesSecretKmsKeyArn !== undefined &&
    settings.kubernetesSecretArn === undefined
  ) {
    problems.push(
      'kubernetesSecretKmsKeyArn: only with kubernetesSecretArn (the key of that secret)',
    );
  }
  if (settings.kubernetesAllowInsecureConnection && settings.kubernetesSecretArn === undefined) {
    problems.push(
      'kubernetesAllowInsecureConnection: only with kubernetesSecretArn (EKS endpoints are always https)',
    );
  }
  if (settings.queueSenderArns.length > 0 && !settings.restrictQueueSenders) {
    problems.push(
      'queueSenderArns: only with restrictQueueSenders=true (without it any principal whose IAM policies allow it may send)',
    );
  }
  if (
    settings.restrictQueueSenders &&
    settings.forwarderIdentity === 'none' &&
    settings.queueSenderArns.length === 0
  ) {
    problems.push(
      "queueSenderArns: required with restrictQueueSenders and forwarderIdentity=none: name the forwarder's IAM role or user, or the queues refuse it",
    );
  }
  if (settings.kubernetesSecretArn !== undefined && settings.nodeSecurityGroupIds.length === 0) {
    problems.push(
      "nodeSecurityGroupIds: required outside EKS (with kubernetesSecretArn): the NLBs reach the nodes' NodePorts and health port only through a rule on the nodes' security groups, and every target times out without one",
    );
  }
  for (const ports of settings.podTargetPorts) {
    const [from = 0, to = from] = ports.split('-').map(Number);
    if (to > 65535 || from > to)
      problems.push(`podTargetPorts: ${ports} is not a port range within 1-65535`);
  }
  for (const problem of tagProblems(new Map(Object.entries(settings.defaultTags)))) {
    problems.push(`defaultTags: ${problem}`);
  }
  const tooLarge = environmentSizeProblem(settings);
  if (tooLarge !== undefined)
    problems.push(`clusterCertificateAuthorityData, defaultTags, tenantPolicy: ${tooLarge}`);
  return problems;
}

/**
 * The stack's name for a cluster. CloudFormation allows letters, digits and "-" (128 at most);
 * EKS cluster names may also hold "_" and ".", so such a name is spelled with "-" and made
 * unique again by a hash of the real one.
 */
export function stackNameFor(clusterName: string): string {
  const prefix = 'ServerlessServiceController-';
  const spelled = clusterName.replace(/[^A-Za-z0-9-]/g, '-');
  if (spelled === clusterName && prefix.length + spelled.length <= 128) return prefix + spelled;
  const hash = createHash('sha256').update(clusterName).digest('hex').slice(0, 8);
  return `${prefix}${spelled.slice(0, 128 - prefix.length - hash.length - 1)}-${hash}`;
}
