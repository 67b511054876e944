import {
  RequeueAfterError,
  RetryableError,
  TerminalError,
  type FailureClass,
} from '../core/errors';

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
 * How soon a pass that AWS throttled comes back the first time: the buckets refill at 3–20 calls a
 * second, so a couple of seconds finds tokens again, and the pass does not hold a Lambda while
 * they refill. It doubles each time the message comes back throttled again (key-passes.ts).
 */
export const throttledRequeueSeconds = 2;

/**
 * Translates an AWS SDK error into our taxonomy (docs/design.md §4): a refusal of what the
 * spec asks for is terminal; throttling is no failure but a requeue (the SDK does not retry it in
 * place: bounded-retry.ts); everything else is retryable, with the class of what fixes it.
 */
export function translateAwsError(error: unknown, action: string): Error {
  // Our own limits' answer (process-limiter.ts, registration-budget.ts): no AWS error at all.
  if (error instanceof RequeueAfterError) return error;
  const code = awsErrorCode(error);
  const message = error instanceof Error ? error.message : String(error);
  const text = `${action}: ${code ? `${code}: ` : ''}${message}`;
  const found = awsErrorClass(code);
  if (found === 'spec') return new TerminalError(`AWS refused to ${text}`, { cause: error });
  if (found === 'throttling') {
    return new RequeueAfterError(
      `AWS throttled ${text}; the sync comes back in ${throttledRequeueSeconds} s`,
      throttledRequeueSeconds,
      { cause: error, grows: true },
    );
  }
  return new RetryableError(text, { cause: error, failureClass: found ?? 'transient' });
}

/** The resources whose "does not exist" answers the provider tells apart. */
export type ResourceKind = 'security group' | 'target group' | 'load balancer' | 'listener';

const notFoundCodes: Readonly<Record<string, ResourceKind>> = {
  'InvalidGroup.NotFound': 'security group',
  'InvalidGroupId.NotFound': 'security group',
  TargetGroupNotFound: 'target group',
  TargetGroupNotFoundException: 'target group',
  LoadBalancerNotFound: 'load balancer',
  LoadBalancerNotFoundException: 'load balancer',
  ListenerNotFound: 'listener',
  ListenerNotFoundException: 'listener',
};

/** What an AWS "does not exist" answer is about, or undefined for any other error. */
export function notFoundKind(error: unknown): ResourceKind | undefined {
  const code = awsErrorCode(error);
  return Object.hasOwn(notFoundCodes, code) ? notFoundCodes[code] : undefined;
}

/** What an ID or ARN names, from its shape (listener ARNs also hold `loadbalancer`). */
export function resourceKindOf(id: string): ResourceKind | undefined {
  if (id.startsWith('sg-')) return 'security group';
  if (id.includes(':listener/')) return 'listener';
  if (id.includes(':targetgroup/')) return 'target group';
  if (id.includes(':loadbalancer/')) return 'load balancer';
  return undefined;
}

/**
 * A resource AWS does not show yet. Right after a create, AWS may answer "not found" to calls
 * naming it, leave it out of filtered lookups, show it without its tags, or refuse a repeated
 * create of its name as a duplicate (eventual consistency, docs/aws-provider.md#errors). Time
 * alone fixes that, so it is retried with backoff and never taken for "gone" or "someone else's".
 */
export class NotVisibleYetError extends RetryableError {
  constructor(action: string, what: string, options?: { cause?: unknown }) {
    super(
      `${action}: not visible yet: ${what}; AWS shows a new resource to every call only some time after its create, so this is retried`,
      { ...options, failureClass: 'transient' },
    );
  }
}
