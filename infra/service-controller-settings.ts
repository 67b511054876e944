import { Token } from 'aws-cdk-lib';
import type { IVpc } from 'aws-cdk-lib/aws-ec2';
import { validatedSettings } from './settings';
import { settingNames, type ControllerSettings } from './settings-schema';

/** The construct's settings: the app's, typed, every one optional where the cluster can give it. */
export type ServiceControllerSettings = Readonly<Partial<ControllerSettings>>;

/**
 * Stand-ins for values only known at deploy (CDK tokens such as an eks.Cluster's endpoint), so the
 * same schema checks everything else, and the environment size check counts each at its longest:
 * a cluster name of 100 characters, an EKS endpoint, an EKS cluster CA (a 2048-bit certificate is
 * about 1,500 characters of base64; 2,000 leaves room).
 */
const deployTimeStandIns: Readonly<Record<string, string>> = {
  clusterName: 'a'.repeat(100),
  vpcId: 'vpc-00000000000000000',
  nodeSecurityGroupIds: 'sg-00000000000000000',
  functionSubnetIds: 'subnet-00000000000000000',
  clusterEndpoint: `https://${'A'.repeat(32)}.gr7.ap-southeast-4.eks.amazonaws.com`,
  clusterCertificateAuthorityData: 'A'.repeat(2000),
  kubernetesSecretArn: 'arn:aws:secretsmanager:us-east-1:000000000000:secret:deploy-time-AAAAAA',
  kubernetesSecretKmsKeyArn: 'arn:aws:kms:us-east-1:000000000000:key/deploy-time',
  oidcProviderArn: 'arn:aws:iam::000000000000:oidc-provider/deploy-time',
  oidcIssuer: `https://oidc.eks.ap-southeast-4.amazonaws.com/id/${'A'.repeat(32)}`,
  alarmTopicArn: 'arn:aws:sns:us-east-1:000000000000:deploy-time',
  queueSenderArns: 'arn:aws:iam::000000000000:role/deploy-time',
};

/**
 * What the construct reads of a cluster. A structural type, so that an `ICluster` of `aws-eks` and
 * one of `aws-eks-v2` are both accepted (neither extends the other), and so that the package's
 * declarations name neither module: `aws-eks-v2` is missing from the older aws-cdk-lib releases in
 * the peer range.
 */
export interface ControllerCluster {
  readonly clusterName: string;
  readonly clusterEndpoint: string;
  readonly clusterCertificateAuthorityData: string;
  readonly clusterSecurityGroupId: string;
  readonly vpc: IVpc;
}

/** The given settings, completed from the cluster where one is given (explicit values win). */
export function settingsWithClusterDefaults(
  settings: ServiceControllerSettings,
  cluster: ControllerCluster | undefined,
): Record<string, unknown> {
  const given: Record<string, unknown> = {};
  for (const name of settingNames) {
    const value = (settings as Record<string, unknown>)[name];
    if (value !== undefined) given[name] = value;
  }
  if (cluster === undefined) return given;
  const eksAccess =
    given.kubernetesSecretArn === undefined &&
    given.clusterEndpoint === undefined &&
    given.clusterCertificateAuthorityData === undefined
      ? {
          clusterEndpoint: cluster.clusterEndpoint,
          clusterCertificateAuthorityData: cluster.clusterCertificateAuthorityData,
        }
      : {};
  // Only what is missing is read: an imported cluster (eks.Cluster.fromClusterAttributes) throws
  // for each attribute it was not given, so reading a setting the user gave would fail the synth.
  return {
    ...(given.clusterName === undefined ? { clusterName: cluster.clusterName } : {}),
    ...(given.vpcId === undefined ? { vpcId: cluster.vpc.vpcId } : {}),
    ...(given.nodeSecurityGroupIds === undefined
      ? { nodeSecurityGroupIds: [cluster.clusterSecurityGroupId] }
      : {}),
    ...eksAccess,
    ...given,
  };
}

/**
 * Checks the settings with the app's schema and combination rules (infra/settings.ts). A value
 * CDK resolves only at deploy is checked as its stand-in and kept as given.
 */
export function validatedConstructSettings(raw: Record<string, unknown>): ControllerSettings {
  const deployTime = new Map<string, unknown>();
  const checked: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(raw)) {
    const standIn = deployTimeStandIns[name];
    if (standIn !== undefined && Array.isArray(value)) {
      if (value.some((item) => Token.isUnresolved(item))) deployTime.set(name, value);
      checked[name] = value.map((item: unknown) => (Token.isUnresolved(item) ? standIn : item));
    } else if (standIn !== undefined && Token.isUnresolved(value)) {
      deployTime.set(name, value);
      checked[name] = standIn;
    } else {
      checked[name] = value;
    }
  }
  const settings = validatedSettings(checked, 'invalid ServiceController settings');
  // Each deploy-time value took its stand-in's place in the check; it goes back in unchanged.
  return { ...settings, ...Object.fromEntries(deployTime) };
}
