import { RetryableError, TerminalError } from '../core/errors';

/** The error codes AWS uses for throttling, across ELBv2, EC2 and the tagging API. */
const throttlingCodes = new Set([
  'Throttling',
  'ThrottlingException',
  'RequestLimitExceeded',
  'TooManyRequestsException',
  'RequestThrottled',
  'SlowDown',
]);

/** Quotas and user-supplied values AWS refuses: retrying will not help until the spec changes. */
const terminalCodes = new Set([
  'ValidationError',
  'InvalidConfigurationRequest',
  'CertificateNotFound',
  'SSLPolicyNotFound',
  'UnsupportedProtocol',
  'InvalidSubnet',
  'SubnetNotFound',
  'AllocationIdNotFound',
  'InvalidSecurityGroup',
  'TooManyLoadBalancers',
  'TooManyTargetGroups',
  'TooManyListeners',
  'TooManyTargets',
  'TooManyRegistrationsForTargetId',
  'TooManyCertificates',
  'TooManyTags',
  'InvalidParameterValue',
  'RulesPerSecurityGroupLimitExceeded',
  // A name collision with a resource we do not own (ours are found before they are created).
  'DuplicateTargetGroupName',
  'DuplicateLoadBalancerName',
  'SecurityGroupLimitExceeded',
]);

export function awsErrorCode(error: unknown): string {
  if (typeof error !== 'object' || error === null) return '';
  const { name, Code } = error as { name?: unknown; Code?: unknown };
  return typeof Code === 'string' ? Code : typeof name === 'string' ? name : '';
}

export function isAwsError(error: unknown, ...codes: string[]): boolean {
  return codes.includes(awsErrorCode(error));
}

/**
 * Translates an AWS SDK error into the controller's taxonomy (DESIGN §4): throttling, 5xx and
 * network errors are retryable; rejected values and exhausted quotas are terminal; anything else
 * is retried with backoff.
 */
export function translateAwsError(error: unknown, action: string): Error {
  const code = awsErrorCode(error);
  const message = error instanceof Error ? error.message : String(error);
  const text = `${action}: ${code ? `${code}: ` : ''}${message}`;
  if (throttlingCodes.has(code)) return new RetryableError(text, { cause: error });
  if (terminalCodes.has(code)) return new TerminalError(`AWS refused to ${text}`, { cause: error });
  return new RetryableError(text, { cause: error });
}
