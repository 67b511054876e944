/**
 * Release 0.1's client side, for the cost comparison of issue 37: inside each Lambda instance, a
 * p-throttle limiter per ELBv2 family in its windowed mode (`limit` calls per 1 s window; a call
 * over it sleeps until the next window) and the SDK's `adaptive` retry mode with 5 attempts
 * (throttling backoff, retry quota and the CUBIC client-side rate limiter, ported from
 * @smithy/core's retry module as 0.1 had it): every wait a sleep the function is billed for. No
 * shared registration budget (0.1 had none).
 */
import type { EC2Client } from '@aws-sdk/client-ec2';
import type { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { ResourceGroupsTaggingAPIClient } from '@aws-sdk/client-resource-groups-tagging-api';
import type { NlbClients } from '../../functions/aws/clients';
import type { FakeAwsAccount } from './fake-aws';
import type { VirtualClock } from './virtual-clock';

type ServiceName = 'elbv2' | 'ec2' | 'tagging';

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

export interface Release01ClientStats {
  /** SDK retries after a throttling error. */
  retries: number;
  /** Calls that failed after the SDK gave up (attempts or retry quota exhausted). */
  exhausted: number;
}

/**
 * The NLB provider's clients inside one Lambda instance of release 0.1: the per-process limiter
 * on ELBv2 (every attempt passes it, as its finalizeRequest middleware did) and the SDK's
 * adaptive retry mode with `maxAttempts: 5`.
 */
export class Release01Clients {
  readonly stats: Release01ClientStats = { retries: 0, exhausted: 0 };
  private readonly limiter: ProcessLimiter;
  private readonly adaptive: Record<ServiceName, AdaptiveRateLimiter>;
  private readonly capacity: Record<ServiceName, number> = {
    elbv2: sdkRetry.initialCapacity,
    ec2: sdkRetry.initialCapacity,
    tagging: sdkRetry.initialCapacity,
  };

  constructor(
    private readonly account: FakeAwsAccount,
    private readonly clock: VirtualClock,
    private readonly random: () => number,
  ) {
    this.limiter = new ProcessLimiter(clock);
    this.adaptive = {
      elbv2: new AdaptiveRateLimiter(clock),
      ec2: new AdaptiveRateLimiter(clock),
      tagging: new AdaptiveRateLimiter(clock),
    };
  }

  /** As the provider wants them; only `send` is ever called. */
  asNlbClients(): NlbClients {
    const client = (service: ServiceName) => ({
      send: (command: object) => this.send(service, command),
    });
    return {
      elbv2: client('elbv2') as unknown as ElasticLoadBalancingV2Client,
      ec2: client('ec2') as unknown as EC2Client,
      tagging: client('tagging') as unknown as ResourceGroupsTaggingAPIClient,
    };
  }

  private async send(service: ServiceName, command: object): Promise<unknown> {
    const operation = operationOf(command);
    const adaptive = this.adaptive[service];
    let retries = 0;
    await adaptive.getSendToken();
    for (;;) {
      if (service === 'elbv2') await this.limiter.gate(operation);
      try {
        const output = await this.account.attempt(service, command);
        adaptive.update(false);
        this.capacity[service] = Math.min(
          sdkRetry.initialCapacity,
          this.capacity[service] +
            (retries > 0 ? sdkRetry.throttlingCost : sdkRetry.noRetryIncrement),
        );
        return output;
      } catch (error) {
        if (!isThrottling(error)) throw error;
        adaptive.update(true);
        if (
          retries + 1 >= sdkRetry.maxAttempts ||
          this.capacity[service] < sdkRetry.throttlingCost
        ) {
          this.stats.exhausted++;
          throw error;
        }
        this.capacity[service] -= sdkRetry.throttlingCost;
        const delay = Math.floor(
          this.random() *
            Math.min(sdkRetry.throttlingDelayBaseMs * 2 ** retries, sdkRetry.maximumDelayMs),
        );
        retries++;
        this.stats.retries++;
        await this.clock.sleep(delay);
        await adaptive.getSendToken();
      }
    }
  }
}

function operationOf(command: object): string {
  return command.constructor.name.replace(/Command$/, '');
}

function isThrottling(error: unknown): boolean {
  return (
    error instanceof Error && (error.name === 'Throttling' || error.name === 'RequestLimitExceeded')
  );
}
