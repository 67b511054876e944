/**
 * Credentials that can end up inside error text: a kubeconfig quoted by a YAML parser, a bearer
 * token echoed by a proxy, a PEM key pasted into an annotation. Every error message the controller
 * publishes (Warning events, logs, lifecycle events) passes through here, so a secret that slips
 * into an error is masked, not broadcast.
 */
const secretPatterns: readonly [RegExp, string][] = [
  // PEM blocks, whole or cut short by truncation.
  [
    /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)/g,
    '[redacted key]',
  ],
  // kubeconfig and similar `key: value` / `key=value` fields that hold credentials.
  [
    /(?<![:\w-])(token|id-token|refresh-token|access-token|client-key-data|client-certificate-data|password|secret|secret-access-key|aws_secret_access_key|aws_session_token)(["']?\s*[:=]\s*["']?)[^\s"',}]+/gi,
    '$1$2[redacted]',
  ],
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/g, '$1 [redacted]'],
  // EKS tokens and JWTs, wherever they appear.
  [/\bk8s-aws-v1\.[A-Za-z0-9_-]+/g, '[redacted token]'],
  [/\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*/g, '[redacted token]'],
];

export function redactSecrets(text: string): string {
  let result = text;
  for (const [pattern, replacement] of secretPatterns)
    result = result.replace(pattern, replacement);
  return result;
}
