import type { ControllerConfig } from '../contract/controller-config';
import type { Clock } from '../sync/ports';
import type { KubeConnection } from './in-cluster';
import {
  ClusterConnection,
  insecureConnectionProblems,
  isLoopbackServer,
  withRequestDeadline,
} from './cluster-connection';
import { mintEksToken, type EksToken } from './eks-token';
import { KubeApiClient } from './kube-api-client';
import type { InsecureConnectionLog } from './kubeconfig-secret';

/** How long a kubeconfig read from Secrets Manager is reused before it is read again. */
const secretCacheMs = 5 * 60 * 1000;

/**
 * The longest one request may take, answer body included (the client's own 30 s timeout is on
 * idle time only): well inside the functions' 60 s timeout, so a server that trickles its answer
 * fails the sync with a retryable error instead of timing the function out.
 */
export const requestDeadlineMs = 40_000;

export interface ConnectorOptions {
  /** Where the Warning goes when an insecure connection is accepted; stderr when absent. */
  readonly log?: InsecureConnectionLog | undefined;
  /** The bound on each request's whole time (tests shorten it). */
  readonly requestDeadlineMs?: number | undefined;
}

const stderrLog: InsecureConnectionLog = {
  warn: (message, fields) => console.warn(`warn: ${message} ${JSON.stringify(fields ?? {})}`),
};

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
  options: ConnectorOptions = {},
): () => Promise<KubeApiClient> {
  const settings = config.kubernetes;
  const log = options.log ?? stderrLog;
  const bounded = (connection: KubeConnection) =>
    withRequestDeadline(connection, options.requestDeadlineMs ?? requestDeadlineMs);
  switch (settings.mode) {
    case 'kubeconfig': {
      // The YAML parser loads with the mode that reads YAML: the Lambda bundles (EKS or secret
      // mode) keep it out of what every cold start imports. A bad file fails the first request.
      const api = import('./kubeconfig').then((m) => {
        const connection =
          settings.path !== undefined
            ? m.kubeconfigFileConnection(settings.path)
            : m.defaultConnection(process.env);
        if (connection instanceof ClusterConnection) {
          checkKubeconfigConnection(
            connection,
            settings.path,
            settings.allowInsecureConnection,
            log,
          );
        }
        return new KubeApiClient(bounded(connection));
      });
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
              bounded(
                new ClusterConnection({
                  server: endpoint,
                  ca: Buffer.from(caData, 'base64').toString(),
                  token: freshToken,
                }),
              ),
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
          const connection = kubeConfigFromSecret(secret.SecretString ?? '', settings.secretArn, {
            allowInsecureConnection: settings.allowInsecureConnection,
            log,
          });
          current?.api.close();
          current = { readAt: now, api: new KubeApiClient(bounded(connection)) };
        }
        return current.api;
      };
    }
  }
}

/**
 * A kubeconfig file's connection (local runs, tests): a server on this machine is accepted as
 * is, plain HTTP or unverified (the embedded fake API server, `kubectl proxy`: the token never
 * leaves the host); elsewhere plain HTTP or `insecure-skip-tls-verify` only with
 * `allowInsecureConnection`, and then with a Warning. Refused before any request carries the
 * token.
 */
function checkKubeconfigConnection(
  connection: ClusterConnection,
  path: string | undefined,
  allowInsecureConnection: boolean | undefined,
  log: InsecureConnectionLog,
): void {
  const { access } = connection;
  if (isLoopbackServer(access.server)) return;
  const problems = insecureConnectionProblems(access);
  if (problems.length === 0) return;
  const file = path ?? 'the default kubeconfig';
  if (allowInsecureConnection !== true) {
    throw new Error(
      `the kubeconfig ${file} is refused: ${problems.join('; ')}. Give it an https server and ` +
        'the CA that signed its certificate, or accept the risk with kubernetes.allowInsecureConnection ' +
        '(`npm start -- --allow-insecure-connection`)',
    );
  }
  log.warn('insecure Kubernetes API connection accepted (allowInsecureConnection)', {
    kubeconfig: file,
    server: access.server,
    problems,
  });
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
