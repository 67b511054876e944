import { RetryableError } from '../core/errors';
import { redactSecrets } from '../core/redact';
import { ClusterConnection, insecureConnectionProblems } from './cluster-connection';
import { kubeconfigAccess } from './kubeconfig';

export interface InsecureConnectionLog {
  warn(message: string, fields?: Record<string, unknown>): void;
}

export interface SecretKubeconfigOptions {
  /** `kubernetes.allowInsecureConnection`: accept a plain-HTTP server or unverified TLS. */
  readonly allowInsecureConnection?: boolean | undefined;
  /** Where the Warning goes when an insecure connection is accepted. */
  readonly log?: InsecureConnectionLog | undefined;
}

/**
 * A kubeconfig read from Secrets Manager. The YAML parser's own message quotes the lines around
 * the fault, which hold the token or client key: only its reason and position are kept. Fixed by
 * whoever owns the secret, so retried (a dependency failure) until they do.
 *
 * A plain-HTTP server or `insecure-skip-tls-verify` is refused the same way, before any request
 * carries the token, unless `allowInsecureConnection` accepts it; then every read of the secret
 * logs a Warning naming what is insecure.
 */
export function kubeConfigFromSecret(
  text: string,
  secretArn: string,
  options: SecretKubeconfigOptions = {},
): ClusterConnection {
  let connection: ClusterConnection;
  try {
    connection = new ClusterConnection(kubeconfigAccess(text));
  } catch (error) {
    throw new RetryableError(
      `the kubeconfig in Secrets Manager secret ${secretArn} cannot be read: ${parseProblem(error)}`,
      { failureClass: 'dependency' },
    );
  }
  const problems = insecureConnectionProblems(connection.access);
  if (problems.length === 0) return connection;
  if (options.allowInsecureConnection !== true) {
    throw new RetryableError(
      `the kubeconfig in Secrets Manager secret ${secretArn} is refused: ${problems.join('; ')}. ` +
        'Give it an https server and the CA that signed its certificate, or accept the risk with ' +
        'the kubernetesAllowInsecureConnection setting (kubernetes.allowInsecureConnection)',
      { failureClass: 'dependency' },
    );
  }
  options.log?.warn('insecure Kubernetes API connection accepted (allowInsecureConnection)', {
    secretArn,
    server: connection.access.server,
    problems,
  });
  return connection;
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
  // Not a YAML error (a document of the wrong shape): kubeconfigAccess's messages name no values.
  return error instanceof Error ? redactSecrets(error.message).slice(0, 300) : 'not a kubeconfig';
}
