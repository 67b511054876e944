import { RetryableError, TerminalError, type FailureClass } from '../core/errors';

/**
 * AWS error codes by what fixes them (docs/design.md §4). Only a wrong spec is terminal; quota,
 * capacity, permission and dependency errors are retried with capped backoff, so a raised quota, a
 * fixed policy or a resource that appears is picked up within one backoff period.
 */
const codeClasses: Readonly<Record<string, FailureClass | 'spec'>> = {
  // Throttling, across ELBv2, EC2 and the tagging API.
  Throttling: 'throttling',
  ThrottlingException: 'throttling',
  RequestLimitExceeded: 'throttling',
  TooManyRequestsException: 'throttling',
  RequestThrottled: 'throttling',
  SlowDown: 'throttling',
  // Quotas, adjustable or not: the fix is a quota raise or fewer resources elsewhere.
  TooManyLoadBalancers: 'quota',
  TooManyTargetGroups: 'quota',
  TooManyListeners: 'quota',
  TooManyTargets: 'quota',
  TooManyRegistrationsForTargetId: 'quota',
  TooManyCertificates: 'quota',
  TooManyActions: 'quota',
  TooManyRules: 'quota',
  TooManyUniqueTargetGroupsPerLoadBalancer: 'quota',
  SecurityGroupLimitExceeded: 'quota',
  RulesPerSecurityGroupLimitExceeded: 'quota',
  ResourceLimitExceeded: 'quota',
  LimitExceededException: 'quota',
  AddressLimitExceeded: 'quota',
  // Capacity that AWS or the subnet cannot give right now.
  InsufficientCapacity: 'capacity',
  InsufficientCapacityException: 'capacity',
  InsufficientFreeAddressesInSubnet: 'capacity',
  CapacityUnitsLimitExceeded: 'capacity',
  // Permissions and credentials: the fix is an IAM policy, an opt-in or fresh credentials.
  AccessDenied: 'permission',
  AccessDeniedException: 'permission',
  UnauthorizedOperation: 'permission',
  AuthFailure: 'permission',
  OptInRequired: 'permission',
  InvalidClientTokenId: 'permission',
  UnrecognizedClientException: 'permission',
  ExpiredToken: 'permission',
  ExpiredTokenException: 'permission',
  // Something the load balancer depends on is held, missing or not ready yet (a certificate
  // still being issued, a security group AWS has not propagated, a group still in use).
  DependencyViolation: 'dependency',
  ResourceInUse: 'dependency',
  ResourceInUseException: 'dependency',
  CertificateNotFound: 'dependency',
  CertificateNotFoundException: 'dependency',
  InvalidSecurityGroup: 'dependency',
  InvalidSecurityGroupException: 'dependency',
  InvalidSubnet: 'dependency',
  SubnetNotFound: 'dependency',
  SubnetNotFoundException: 'dependency',
  AllocationIdNotFound: 'dependency',
  AllocationIdNotFoundException: 'dependency',
  // The request as the spec shapes it is refused: only a spec change helps.
  ValidationError: 'spec',
  InvalidConfigurationRequest: 'spec',
  InvalidConfigurationRequestException: 'spec',
  SSLPolicyNotFound: 'spec',
  SSLPolicyNotFoundException: 'spec',
  UnsupportedProtocol: 'spec',
  UnsupportedProtocolException: 'spec',
  InvalidParameterValue: 'spec',
  // At most 50 tags per resource, not adjustable: the additional-resource-tags annotation.
  TooManyTags: 'spec',
  // A name collision with a resource we do not own (ours are found before they are created).
  DuplicateTargetGroupName: 'spec',
  DuplicateLoadBalancerName: 'spec',
};

/** What fixes an AWS error code, or undefined when time may (5xx, network, unknown codes). */
export function awsErrorClass(code: string): FailureClass | 'spec' | undefined {
  return Object.hasOwn(codeClasses, code) ? codeClasses[code] : undefined;
}

export function awsErrorCode(error: unknown): string {
  if (typeof error !== 'object' || error === null) return '';
  const { name, Code } = error as { name?: unknown; Code?: unknown };
  return typeof Code === 'string' ? Code : typeof name === 'string' ? name : '';
}

export function isAwsError(error: unknown, ...codes: string[]): boolean {
  return codes.includes(awsErrorCode(error));
}

/**
 * Translates an AWS SDK error into our taxonomy (docs/design.md §4): a refusal of what the
 * spec asks for is terminal; everything else is retryable, with the class of what fixes it.
 */
export function translateAwsError(error: unknown, action: string): Error {
  const code = awsErrorCode(error);
  const message = error instanceof Error ? error.message : String(error);
  const text = `${action}: ${code ? `${code}: ` : ''}${message}`;
  const found = awsErrorClass(code);
  if (found === 'spec') return new TerminalError(`AWS refused to ${text}`, { cause: error });
  return new RetryableError(text, { cause: error, failureClass: found ?? 'transient' });
}
