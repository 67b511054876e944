import type { Stack } from 'aws-cdk-lib';
import * as eks from 'aws-cdk-lib/aws-eks';
import { LayerVersion } from 'aws-cdk-lib/aws-lambda';

/**
 * An `eks.Cluster` made in the stack, as a platform team's app makes it: its name, endpoint and CA
 * are known only at deploy (tokens). Synthesis needs a kubectl layer only to name; a real app uses
 * @aws-cdk/lambda-layer-kubectl-v34.
 */
export function synthOnlyEksCluster(stack: Stack): eks.Cluster {
  return new eks.Cluster(stack, 'Cluster', {
    version: eks.KubernetesVersion.V1_34,
    kubectlLayer: LayerVersion.fromLayerVersionArn(
      stack,
      'Kubectl',
      `arn:aws:lambda:${stack.region}:${stack.account}:layer:kubectl:1`,
    ),
    authenticationMode: eks.AuthenticationMode.API_AND_CONFIG_MAP,
    defaultCapacity: 0,
  });
}
