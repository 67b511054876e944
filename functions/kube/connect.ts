import { DescribeClusterCommand, EKSClient } from '@aws-sdk/client-eks';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { ControllerConfig } from '../config';
import { RetryableError } from '../core/errors';
import { redactSecrets } from '../core/redact';
import type { Clock } from '../sync/ports';
import { mintEksToken, type EksToken } from './eks-token';

/** How long a kubeconfig read from Secrets Manager is reused before it is read again. */
const secretCacheMs = 5 * 60 * 1000;

/**
 * A factory for the Kubernetes API client, per configured mode: EKS (token minted locally and
 * re-minted before it expires), a kubeconfig kept in Secrets Manager (self-managed clusters), or a
 * kubeconfig file (local runs and tests). Clients are reused while their credentials are fresh.
 */
export function kubernetesConnector(
  config: ControllerConfig,
  clock: Clock,
): () => Promise<CoreV1Api> {
  const settings = config.kubernetes;
  switch (settings.mode) {
    case 'kubeconfig': {
      const kc = new KubeConfig();
      if (settings.path !== undefined) kc.loadFromFile(settings.path);
      else kc.loadFromDefault();
      const api = kc.makeApiClient(CoreV1Api);
      return () => Promise.resolve(api);
    }
    case 'eks': {
      const credentials = defaultProvider();
      let current: { token: EksToken; api: CoreV1Api } | undefined;
      let cluster: Promise<{ endpoint: string; caData: string }> | undefined;
      return async () => {
        const now = clock.now();
        if (current === undefined || current.token.refreshAt <= now) {
          cluster ??= clusterAccess(config, settings).catch((error: unknown) => {
            cluster = undefined;
            throw error;
          });
          const { endpoint, caData } = await cluster;
          const token = await mintEksToken({
            clusterName: settings.clusterName,
            region: config.region,
            credentials,
            now,
          });
          const kc = new KubeConfig();
          kc.loadFromOptions({
            clusters: [{ name: 'eks', server: endpoint, caData }],
            users: [{ name: 'controller', token: token.token }],
            contexts: [{ name: 'eks', cluster: 'eks', user: 'controller' }],
            currentContext: 'eks',
          });
          current = { token, api: kc.makeApiClient(CoreV1Api) };
        }
        return current.api;
      };
    }
    case 'secret': {
      const secrets = new SecretsManagerClient({
        region: config.region,
        ...(config.aws.endpoints.secretsManager
          ? { endpoint: config.aws.endpoints.secretsManager }
          : {}),
      });
      let current: { readAt: number; api: CoreV1Api } | undefined;
      return async () => {
        const now = clock.now().getTime();
        if (current === undefined || now - current.readAt > secretCacheMs) {
          const secret = await secrets.send(
            new GetSecretValueCommand({ SecretId: settings.secretArn }),
          );
          const kc = kubeConfigFromSecret(secret.SecretString ?? '', settings.secretArn);
          current = { readAt: now, api: kc.makeApiClient(CoreV1Api) };
        }
        return current.api;
      };
    }
  }
}

/**
 * A kubeconfig read from Secrets Manager. The YAML parser's own message quotes the lines around
 * the fault, which hold the token or client key: only its reason and position are kept. Fixed by
 * whoever owns the secret, so retried (a dependency failure) until they do.
 */
export function kubeConfigFromSecret(text: string, secretArn: string): KubeConfig {
  const kc = new KubeConfig();
  try {
    kc.loadFromString(text);
  } catch (error) {
    throw new RetryableError(
      `the kubeconfig in Secrets Manager secret ${secretArn} cannot be read: ${parseProblem(error)}`,
      { failureClass: 'dependency' },
    );
  }
  return kc;
}

function parseProblem(error: unknown): string {
  if (typeof error !== 'object' || error === null) return 'not a kubeconfig';
  const { reason, mark } = error as {
    reason?: unknown;
    mark?: { line?: unknown; column?: unknown };
  };
  if (typeof reason === 'string') {
    const where =
      typeof mark?.line === 'number' && typeof mark.column === 'number'
        ? ` at line ${mark.line + 1}, column ${mark.column + 1}`
        : '';
    return `invalid YAML: ${reason}${where}`;
  }
  // Not a YAML error (a document of the wrong shape): client-node's own message names no values.
  return error instanceof Error ? redactSecrets(error.message).slice(0, 300) : 'not a kubeconfig';
}

/** The endpoint and CA from configuration, or else from eks:DescribeCluster. */
export async function clusterAccess(
  config: ControllerConfig,
  settings: { clusterName: string; endpoint?: string; certificateAuthorityData?: string },
): Promise<{ endpoint: string; caData: string }> {
  if (settings.endpoint !== undefined && settings.certificateAuthorityData !== undefined) {
    return { endpoint: settings.endpoint, caData: settings.certificateAuthorityData };
  }
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
