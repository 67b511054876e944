import { describe, expect, it } from 'vitest';
import { throttledRequeueSeconds, translateAwsError } from '../../../functions/aws/aws-errors';
import {
  errorKind,
  failureClassOf,
  NotFoundError,
  RequeueAfterError,
  RetryableError,
  TerminalError,
} from '../../../functions/core/errors';
import { KubeApiError } from '../../../functions/kube/kube-api-client';
import { translateKubeError } from '../../../functions/kube/kubernetes-api';

/** Shaped like the SDK's ServiceException: the code is the error's name. */
function awsError(code: string): Error {
  return Object.assign(new Error(`${code} happened`), { name: code, $fault: 'client' });
}

describe('AWS errors by what fixes them (docs/design.md §4)', () => {
  it.each(['Throttling', 'RequestLimitExceeded', 'ThrottlingException'])(
    '%s is no failure: the sync comes back through the queue in a moment (issue 37)',
    (code) => {
      const translated = translateAwsError(awsError(code), 'create load balancer');
      expect(translated).toBeInstanceOf(RequeueAfterError);
      expect(errorKind(translated)).toBe('requeue-after');
      expect((translated as RequeueAfterError).seconds).toBe(throttledRequeueSeconds);
      expect(translated.message).toMatch(/^AWS throttled create load balancer: /);
    },
  );

  it("our own limits' requeue passes through untouched", () => {
    const requeue = new RequeueAfterError('the budget is booked', 3);
    expect(translateAwsError(requeue, 'register targets')).toBe(requeue);
  });

  it.each([
    ['TooManyLoadBalancers', 'quota'],
    ['TooManyTargets', 'quota'],
    ['TooManyRegistrationsForTargetId', 'quota'],
    ['SecurityGroupLimitExceeded', 'quota'],
    ['RulesPerSecurityGroupLimitExceeded', 'quota'],
    ['InsufficientFreeAddressesInSubnet', 'capacity'],
    ['AccessDenied', 'permission'],
    ['AccessDeniedException', 'permission'],
    ['UnauthorizedOperation', 'permission'],
    ['DependencyViolation', 'dependency'],
    ['ResourceInUse', 'dependency'],
    ['CertificateNotFound', 'dependency'],
    ['InternalFailure', 'transient'],
    ['SomethingNew', 'transient'],
  ])('%s is retried, classed %s', (code, failureClass) => {
    const translated = translateAwsError(awsError(code), 'create load balancer');
    expect(translated).toBeInstanceOf(RetryableError);
    expect(failureClassOf(translated)).toBe(failureClass);
    expect(translated.message).toBe(`create load balancer: ${code}: ${code} happened`);
  });

  it.each([
    'ValidationError',
    'InvalidConfigurationRequest',
    'UnsupportedProtocol',
    'SSLPolicyNotFound',
    'InvalidParameterValue',
    'DuplicateLoadBalancerName',
    'TooManyTags',
  ])('%s is a spec error: terminal', (code) => {
    const translated = translateAwsError(awsError(code), 'create load balancer');
    expect(translated).toBeInstanceOf(TerminalError);
    expect(translated.message).toMatch(/^AWS refused to create load balancer: /);
  });

  it('does not take an inherited property for a code (no prototype keys)', () => {
    expect(failureClassOf(translateAwsError(awsError('constructor'), 'x'))).toBe('transient');
    expect(errorKind(translateAwsError(awsError('toString'), 'x'))).toBe('retryable');
  });

  it('classes an unclassified error as transient', () => {
    expect(failureClassOf(new Error('socket hang up'))).toBe('transient');
    expect(failureClassOf(new RetryableError('timeout'))).toBe('transient');
  });
});

describe('Kubernetes API errors by what fixes them', () => {
  const apiError = (code: number) =>
    new KubeApiError(code, JSON.stringify({ message: `status ${code}` }), 'refused');

  it.each([
    [401, 'permission'],
    [403, 'permission'],
    [429, 'throttling'],
    [500, 'transient'],
    [503, 'transient'],
  ])('%i is retried, classed %s', (code, failureClass) => {
    const translated = translateKubeError(apiError(code), 'patch status');
    expect(errorKind(translated)).toBe('retryable');
    expect(failureClassOf(translated)).toBe(failureClass);
  });

  it('404 is NotFound and 422 a refusal of what we sent', () => {
    expect(translateKubeError(apiError(404), 'read')).toBeInstanceOf(NotFoundError);
    expect(translateKubeError(apiError(422), 'patch')).toBeInstanceOf(TerminalError);
  });
});
