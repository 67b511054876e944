/**
 * Rate limits on virtual time: AWS's account-level token buckets, the controller's per-process
 * limiter (functions/aws/clients.ts addRateLimits, p-throttle's windowed mode), and the SDK's
 * retry strategy in `adaptive` mode (what createRuntime configures), ported from
 * @smithy/core's retry module as installed (retries-2026 constants).
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
} as const;

export type BucketName = keyof typeof awsRateLimits;

export function bucketFor(service: 'elbv2' | 'ec2' | 'tagging', operation: string): BucketName {
  if (service === 'ec2') return 'ec2Describe';
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

/**
 * The controller's per-process limiter, family by family as in functions/aws/clients.ts
 * (RegisterTargets|DeregisterTargets 4/s, Modify|Set|Add|Remove 3/s, Describe 10/s, rest 5/s),
 * each a p-throttle in its default windowed mode: `limit` calls per 1 s window.
 */
export class ProcessLimiter {
  private readonly families = [
    { pattern: /^(Register|Deregister)Targets/, limit: 4 },
    { pattern: /^(Modify|Set|Add|Remove)/, limit: 3 },
    { pattern: /^Describe/, limit: 10 },
    { pattern: /./, limit: 5 },
  ].map((f) => ({ ...f, tick: -Infinity, weight: 0 }));

  constructor(private readonly clock: VirtualClock) {}

  async gate(operation: string): Promise<void> {
    const family = this.families.find((f) => f.pattern.test(operation));
    if (family === undefined) return;
    const now = this.clock.ms;
    const interval = 1000;
    let delay: number;
    if (now - family.tick > interval) {
      family.weight = 1;
      family.tick = now;
      delay = 0;
    } else {
      if (family.weight + 1 <= family.limit) family.weight += 1;
      else {
        family.tick += interval;
        family.weight = 1;
      }
      delay = family.tick - now;
    }
    if (delay > 0) await this.clock.sleep(Math.max(1, delay));
  }
}

/** The SDK's retry constants (@smithy/core retry, retries-2026 configuration). */
export const sdkRetry = {
  maxAttempts: 5,
  throttlingDelayBaseMs: 1000,
  maximumDelayMs: 20_000,
  initialCapacity: 500,
  throttlingCost: 5,
  noRetryIncrement: 1,
} as const;

/**
 * The SDK's `adaptive` client-side rate limiter (a CUBIC controller that starts after the first
 * throttle), on virtual time.
 */
export class AdaptiveRateLimiter {
  private readonly beta = 0.7;
  private readonly minCapacity = 1;
  private readonly minFillRate = 0.5;
  private readonly scaleConstant = 0.4;
  private readonly smooth = 0.8;
  private enabled = false;
  private availableTokens = 0;
  private lastMaxRate = 0;
  private measuredTxRate = 0;
  private requestCount = 0;
  private fillRate = 0.5;
  private lastThrottleTime: number;
  private lastTimestamp = 0;
  private lastTxRateBucket: number;
  private maxCapacity = 1;
  private timeWindow = 0;

  constructor(private readonly clock: VirtualClock) {
    this.lastThrottleTime = this.seconds();
    this.lastTxRateBucket = Math.floor(this.seconds());
  }

  async getSendToken(): Promise<void> {
    if (!this.enabled) return;
    this.refill();
    while (this.availableTokens < 1) {
      // setTimeout waits at least 1 ms.
      await this.clock.sleep(Math.max(1, ((1 - this.availableTokens) / this.fillRate) * 1000));
      this.refill();
    }
    this.availableTokens -= 1;
  }

  update(throttled: boolean): void {
    this.updateMeasuredRate();
    let rate: number;
    if (throttled) {
      const rateToUse = !this.enabled
        ? this.measuredTxRate
        : Math.min(this.measuredTxRate, this.fillRate);
      this.lastMaxRate = rateToUse;
      this.timeWindow = Math.cbrt((this.lastMaxRate * (1 - this.beta)) / this.scaleConstant);
      this.lastThrottleTime = this.seconds();
      rate = rateToUse * this.beta;
      this.enabled = true;
    } else {
      this.timeWindow = Math.cbrt((this.lastMaxRate * (1 - this.beta)) / this.scaleConstant);
      rate =
        this.scaleConstant * (this.seconds() - this.lastThrottleTime - this.timeWindow) ** 3 +
        this.lastMaxRate;
    }
    const newRate = Math.min(rate, 2 * this.measuredTxRate);
    this.refill();
    this.fillRate = Math.max(newRate, this.minFillRate);
    this.maxCapacity = Math.max(newRate, this.minCapacity);
    this.availableTokens = Math.min(this.availableTokens, this.maxCapacity);
  }

  private seconds(): number {
    return this.clock.ms / 1000;
  }

  private refill(): void {
    const t = this.seconds();
    if (!this.lastTimestamp) {
      this.lastTimestamp = t;
      return;
    }
    this.availableTokens = Math.min(
      this.maxCapacity,
      this.availableTokens + (t - this.lastTimestamp) * this.fillRate,
    );
    this.lastTimestamp = t;
  }

  private updateMeasuredRate(): void {
    const t = this.seconds();
    const bucket = Math.floor(t * 2) / 2;
    this.requestCount++;
    if (bucket > this.lastTxRateBucket) {
      const current = this.requestCount / (bucket - this.lastTxRateBucket);
      this.measuredTxRate = current * this.smooth + this.measuredTxRate * (1 - this.smooth);
      this.requestCount = 0;
      this.lastTxRateBucket = bucket;
    }
  }
}
