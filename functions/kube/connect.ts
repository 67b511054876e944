import type { ControllerConfig } from '../config';
import type { Clock } from '../sync/ports';
import { ClusterConnection } from './cluster-connection';
import { mintEksToken, type EksToken } from './eks-token';
import { KubeApiClient } from './kube-api-client';

/** How long a kubeconfig read from Secrets Manager is reused before it is read again. */
const secretCacheMs = 5 * 60 * 1000;

/**
 * A factory for the Kubernetes API client, per configured mode: EKS (token minted locally and
 * re-minted before it expires), a kubeconfig kept in Secrets Manager (self-managed clusters), or a
 * kubeconfig file (local runs and tests; without a path, $KUBECONFIG, ~/.kube/config or the Pod's
 * ServiceAccount). Clients are reused while their credentials are fresh.
 *
 * The EKS and Secrets Manager clients are imported only by the mode that uses them: a function
 * in EKS mode never evaluates the Secrets Manager client, and neither is evaluated at cold start.
 */
export function kubernetesConnector(
  config: ControllerConfig,
  clock: Clock,
): () => Promise<KubeApiClient> {
  const settings = config.kubernetes;
  switch (settings.mode) {
    case 'kubeconfig': {
      // The YAML parser loads with the mode that reads YAML: the Lambda bundles (EKS or secret
      // mode) keep it out of what every cold start imports. A bad file fails the first request.
      const api = import('./kubeconfig').then(
        (m) =>
          new KubeApiClient(
            settings.path !== undefined
              ? m.kubeconfigFileConnection(settings.path)
              : m.defaultConnection(process.env),
          ),
      );
      api.catch(() => undefined);
      return () => api;
    }
    case 'eks': {
      let token: EksToken | undefined;
      let credentials: Promise<Parameters<typeof mintEksToken>[0]['credentials']> | undefined;
      // One client per cluster access: the token is re-minted inside it, the connection stays.
      let client: Promise<KubeApiClient> | undefined;
      const freshToken = async (): Promise<string> => {
        const now = clock.now();
        if (token === undefined || token.refreshAt <= now) {
          credentials ??= import('@aws-sdk/credential-provider-node').then((m) =>
            m.defaultProvider(),
          );
          token = await mintEksToken({
            clusterName: settings.clusterName,
            region: config.region,
            credentials: await credentials,
            now,
          });
        }
        return token.token;
      };
      return async () => {
        client ??= clusterAccess(config, settings).then(
          ({ endpoint, caData }) =>
            new KubeApiClient(
              new ClusterConnection({
                server: endpoint,
                ca: Buffer.from(caData, 'base64').toString(),
                token: freshToken,
              }),
            ),
        );
        const current = client;
        // A failed DescribeCluster is tried again by the next call, not remembered.
        current.catch(() => {
          if (client === current) client = undefined;
        });
        const api = await current;
        await freshToken();
        return api;
      };
    }
    case 'secret': {
      const secrets = import('@aws-sdk/client-secrets-manager').then((m) => ({
        client: new m.SecretsManagerClient({
          region: config.region,
          ...(config.aws.endpoints.secretsManager
            ? { endpoint: config.aws.endpoints.secretsManager }
            : {}),
        }),
        GetSecretValueCommand: m.GetSecretValueCommand,
      }));
      let current: { readAt: number; api: KubeApiClient } | undefined;
      return async () => {
        const now = clock.now().getTime();
        if (current === undefined || now - current.readAt > secretCacheMs) {
          const { client, GetSecretValueCommand } = await secrets;
          const secret = await client.send(
            new GetSecretValueCommand({ SecretId: settings.secretArn }),
          );
          const { kubeConfigFromSecret } = await import('./kubeconfig-secret');
          const connection = kubeConfigFromSecret(secret.SecretString ?? '', settings.secretArn);
          current?.api.close();
          current = { readAt: now, api: new KubeApiClient(connection) };
        }
        return current.api;
      };
    }
  }
}

/** The endpoint and CA from configuration, or else from eks:DescribeCluster. */
export async function clusterAccess(
  config: ControllerConfig,
  settings: { clusterName: string; endpoint?: string; certificateAuthorityData?: string },
): Promise<{ endpoint: string; caData: string }> {
  if (settings.endpoint !== undefined && settings.certificateAuthorityData !== undefined) {
    return { endpoint: settings.endpoint, caData: settings.certificateAuthorityData };
  }
  const { DescribeClusterCommand, EKSClient } = await import('@aws-sdk/client-eks');
  const eks = new EKSClient({
    region: config.region,
    ...(config.aws.endpoints.eks ? { endpoint: config.aws.endpoints.eks } : {}),
  });
  const { cluster } = await eks.send(new DescribeClusterCommand({ name: settings.clusterName }));
  const endpoint = cluster?.endpoint;
  const caData = cluster?.certificateAuthority?.data;
  if (endpoint === undefined || caData === undefined) {
    throw new Error(`EKS cluster ${settings.clusterName} has no endpoint or CA yet`);
  }
  return { endpoint, caData };
}
