import { RetryableError } from '../core/errors';
import { redactSecrets } from '../core/redact';
import { ClusterConnection } from './cluster-connection';
import { kubeconfigAccess } from './kubeconfig';

/**
 * A kubeconfig read from Secrets Manager. The YAML parser's own message quotes the lines around
 * the fault, which hold the token or client key: only its reason and position are kept. Fixed by
 * whoever owns the secret, so retried (a dependency failure) until they do.
 */
export function kubeConfigFromSecret(text: string, secretArn: string): ClusterConnection {
  try {
    return new ClusterConnection(kubeconfigAccess(text));
  } catch (error) {
    throw new RetryableError(
      `the kubeconfig in Secrets Manager secret ${secretArn} cannot be read: ${parseProblem(error)}`,
      { failureClass: 'dependency' },
    );
  }
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
