/**
 * AWS's account-level token buckets on virtual time. The controller's side of the rate (its
 * per-process limiter and registration budget) runs as the real classes (bench/sim/fake-aws.ts).
 */
import type { VirtualClock } from './virtual-clock';

/** An account-level bucket: `capacity` tokens, refilled at `refillPerSecond`. */
export interface BucketSpec {
  readonly capacity: number;
  readonly refillPerSecond: number;
}

/** What the benchmark models, with where each number comes from (printed in the report). */
export const awsRateLimits = {
  elbv2Registration: {
    capacity: 20,
    refillPerSecond: 4,
    applies: 'ELBv2 RegisterTargets and DeregisterTargets (one shared bucket)',
    source:
      'AWS Load Balancer Controller defaults (pkg/aws/throttle/defaults.go, "4:20"; PR #4641 aligns them with the ' +
      'table in "Request throttling for the ELB API", docs.aws.amazon.com/elasticloadbalancing/latest/userguide/' +
      'elb-api-throttling.html); docs/design.md §6',
  },
  elbv2Describe: {
    capacity: 40,
    refillPerSecond: 10,
    applies: 'ELBv2 Describe* (one shared bucket)',
    source:
      '"Request throttling for the ELB API" (AWS docs): non-mutating actions, 40-token bucket refilled at 10/s',
  },
  elbv2Other: {
    capacity: 20,
    refillPerSecond: 3,
    applies: 'other ELBv2 actions (Create*, Modify*, Delete*, tags)',
    source: 'AWS Load Balancer Controller defaults for Modify* (3/s, burst 20), PR #4641',
  },
  ec2Describe: {
    capacity: 100,
    refillPerSecond: 20,
    applies: 'EC2 Describe*',
    source:
      '"Request throttling for the Amazon EC2 API" (AWS docs example): non-mutating actions, 100 tokens, 20/s',
  },
  ec2Mutating: {
    capacity: 50,
    refillPerSecond: 5,
    applies:
      'EC2 CreateSecurityGroup, AuthorizeSecurityGroupIngress, RevokeSecurityGroupIngress, DeleteSecurityGroup, CreateTags, DeleteTags (one shared bucket)',
    source:
      '"Request throttling for the Amazon EC2 API", docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html: ' +
      'mutating actions, 50 tokens, 5/s (its resource-intensive actions, among them Authorize/RevokeSecurityGroupIngress, ' +
      'also 50 and 5/s; CreateTags and DeleteTags 100 and 10/s; AWS keeps a bucket per action, one shared here)',
  },
} as const;

export type BucketName = keyof typeof awsRateLimits;

export function bucketFor(service: 'elbv2' | 'ec2' | 'tagging', operation: string): BucketName {
  if (service === 'ec2') return operation.startsWith('Describe') ? 'ec2Describe' : 'ec2Mutating';
  if (/^(Register|Deregister)Targets$/.test(operation)) return 'elbv2Registration';
  if (operation.startsWith('Describe')) return 'elbv2Describe';
  return 'elbv2Other';
}

export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly spec: BucketSpec,
    private readonly clock: VirtualClock,
  ) {
    this.tokens = spec.capacity;
    this.last = clock.ms;
  }

  /** Takes a token if there is one (AWS answers ThrottlingException otherwise). */
  tryTake(): boolean {
    this.refill();
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** Milliseconds until a token is there. */
  waitMs(): number {
    this.refill();
    return this.tokens >= 1 ? 0 : ((1 - this.tokens) / this.spec.refillPerSecond) * 1000;
  }

  private refill(): void {
    const now = this.clock.ms;
    this.tokens = Math.min(
      this.spec.capacity,
      this.tokens + ((now - this.last) / 1000) * this.spec.refillPerSecond,
    );
    this.last = now;
  }
}
