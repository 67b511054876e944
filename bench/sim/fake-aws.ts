/**
 * An in-memory ELBv2 / EC2 / tagging API on virtual time, with a fixed latency per call and AWS's
 * account-level token buckets, and the client side as one Lambda instance sees it: the
 * controller's per-process limiter and the SDK's adaptive retries. It implements only what the NLB
 * provider sends on a node change or an endpoint change (DescribeTags of the recorded target
 * groups, RegisterTargets, DeregisterTargets, DescribeTargetHealth and DescribeTargetGroups, and
 * GetResources on the failure path); any other command fails loudly. A target group of TargetType
 * `ip` (pod targets, issue 36) holds `ip:port`, as the NLB model names a pod target: each target's
 * `Port`, or the group's when it has none.
 */
import type { EC2Client } from '@aws-sdk/client-ec2';
import type { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { ResourceGroupsTaggingAPIClient } from '@aws-sdk/client-resource-groups-tagging-api';
import type { NlbClients } from '../../functions/aws/clients';
import {
  attachRegistrationBudget,
  type RegistrationBudget,
} from '../../functions/aws/registration-budget';
import { ownershipTags } from '../../functions/nlb/model/naming';
import { ProcessRateLimiter } from '../../functions/aws/process-limiter';
import { awsRateLimits, bucketFor, TokenBucket, type BucketName } from './aws-limits';
import type { VirtualClock } from './virtual-clock';

type ServiceName = 'elbv2' | 'ec2' | 'tagging';

export interface FakeTargetGroup {
  readonly arn: string;
  readonly serviceKey: string;
  readonly serviceUid: string;
  readonly loadBalancerArn: string;
  /** Absent: `instance`, AWS's default. */
  readonly targetType?: 'ip' | undefined;
  /** The group's port: what an `ip` target without a Port of its own is registered on. */
  readonly port?: number | undefined;
  /** Instance IDs; `ip:port` in an `ip` group. */
  readonly targets: Set<string>;
}

export interface AwsCallStats {
  attempts: number;
  throttled: number;
  readonly byOperation: Record<string, number>;
  readonly throttledByOperation: Record<string, number>;
}

const registration = /^(Register|Deregister)Targets$/;

function operationOf(command: object): string {
  return command.constructor.name.replace(/Command$/, '');
}

function inputOf(command: object): Record<string, unknown> {
  return ((command as { input?: unknown }).input ?? {}) as Record<string, unknown>;
}

/** Shaped like the SDK's ServiceException, so translateAwsError classifies it as AWS would. */
function throttlingError(service: ServiceName): Error {
  const error = new Error('Rate exceeded');
  error.name = service === 'ec2' ? 'RequestLimitExceeded' : 'Throttling';
  return Object.assign(error, { $fault: 'client', $metadata: { httpStatusCode: 400 } });
}

function notFound(what: string): Error {
  return Object.assign(new Error(`${what} not found`), {
    name: 'TargetGroupNotFound',
    $fault: 'client',
  });
}

/** A target as the group keeps it: an instance by its ID, a pod by `ip:port`. */
function targetKey(tg: FakeTargetGroup, target: { Id?: string; Port?: number }): string {
  const id = target.Id ?? '';
  if (tg.targetType !== 'ip') return id;
  const port = target.Port ?? tg.port;
  if (port === undefined) {
    throw Object.assign(new Error(`target ${id} has no port and ${tg.arn} none either`), {
      name: 'ValidationError',
      $fault: 'client',
    });
  }
  return `${id}:${port}`;
}

/** A kept target as DescribeTargetHealth names it: `ip` groups with its Port. */
function describedTarget(tg: FakeTargetGroup, key: string): { Id: string; Port?: number } {
  if (tg.targetType !== 'ip') return { Id: key };
  const colon = key.lastIndexOf(':');
  return { Id: key.slice(0, colon), Port: Number(key.slice(colon + 1)) };
}

function throwing(error: Error): never {
  throw error;
}

function isThrottling(error: unknown): boolean {
  return (
    error instanceof Error && (error.name === 'Throttling' || error.name === 'RequestLimitExceeded')
  );
}

/** The AWS side: one account and Region. */
export class FakeAwsAccount {
  readonly targetGroups = new Map<string, FakeTargetGroup>();
  readonly stats: AwsCallStats = {
    attempts: 0,
    throttled: 0,
    byOperation: {},
    throttledByOperation: {},
  };
  /** Called after every successful target change. */
  onTargetsChanged: ((tg: FakeTargetGroup) => void) | undefined;
  private readonly buckets: Record<BucketName, TokenBucket>;

  constructor(
    private readonly clock: VirtualClock,
    readonly latencyMs: number,
    /** The cluster the ownership tags name (the simulated controller's `clusterName`). */
    readonly clusterName = 'bench',
  ) {
    this.buckets = {
      elbv2Registration: new TokenBucket(awsRateLimits.elbv2Registration, clock),
      elbv2Describe: new TokenBucket(awsRateLimits.elbv2Describe, clock),
      elbv2Other: new TokenBucket(awsRateLimits.elbv2Other, clock),
      ec2Describe: new TokenBucket(awsRateLimits.ec2Describe, clock),
    };
  }

  addTargetGroup(tg: Omit<FakeTargetGroup, 'targets'> & { targets: Iterable<string> }): void {
    this.targetGroups.set(tg.arn, { ...tg, targets: new Set(tg.targets) });
  }

  /** One HTTP attempt: served, or refused with a throttling error when its bucket is empty. */
  async attempt(service: ServiceName, command: object): Promise<unknown> {
    const operation = operationOf(command);
    this.stats.attempts++;
    this.stats.byOperation[operation] = (this.stats.byOperation[operation] ?? 0) + 1;
    const allowed = service === 'tagging' || this.buckets[bucketFor(service, operation)].tryTake();
    await this.clock.sleep(this.latencyMs);
    if (!allowed) {
      this.stats.throttled++;
      this.stats.throttledByOperation[operation] =
        (this.stats.throttledByOperation[operation] ?? 0) + 1;
      throw throttlingError(service);
    }
    return this.serve(operation, inputOf(command));
  }

  /**
   * A call by a client that never sees a throttling error: it waits until its bucket has a token
   * (the seed model: an optimistic stand-in for the SDK retries and cross-request backoff of
   * cloud-provider-aws).
   */
  async patientCall(service: 'elbv2' | 'ec2', operation: string): Promise<void> {
    const bucket = this.buckets[bucketFor(service, operation)];
    this.stats.attempts++;
    this.stats.byOperation[operation] = (this.stats.byOperation[operation] ?? 0) + 1;
    while (!bucket.tryTake()) await this.clock.sleep(Math.max(1, bucket.waitMs()));
    await this.clock.sleep(this.latencyMs);
  }

  private serve(operation: string, input: Record<string, unknown>): unknown {
    switch (operation) {
      case 'RegisterTargets':
      case 'DeregisterTargets': {
        const tg = this.targetGroups.get(String(input.TargetGroupArn));
        if (tg === undefined) throw notFound('target group');
        const targets = (input.Targets ?? []) as { Id?: string; Port?: number }[];
        const ids = targets.map((t) => targetKey(tg, t));
        for (const id of ids) {
          if (operation === 'RegisterTargets') tg.targets.add(id);
          else tg.targets.delete(id);
        }
        this.onTargetsChanged?.(tg);
        return {};
      }
      case 'DescribeTargetHealth': {
        // A host update after a failed pass reads what is registered instead of the record.
        const tg = this.targetGroups.get(String(input.TargetGroupArn));
        if (tg === undefined) throw notFound('target group');
        return {
          TargetHealthDescriptions: [...tg.targets].map((key) => ({
            Target: describedTarget(tg, key),
            TargetHealth: { State: 'healthy' },
          })),
        };
      }
      case 'DescribeTargetGroups': {
        // By ARNs (one unknown ARN fails the call, as in AWS) or by load balancer; one page.
        const arns = input.TargetGroupArns as string[] | undefined;
        const groups =
          arns !== undefined
            ? arns.map((arn) => this.targetGroups.get(arn) ?? throwing(notFound(arn)))
            : [...this.targetGroups.values()].filter(
                (tg) => tg.loadBalancerArn === input.LoadBalancerArn,
              );
        return {
          TargetGroups: groups.map((tg) => ({
            TargetGroupArn: tg.arn,
            TargetType: tg.targetType ?? 'instance',
            ...(tg.port !== undefined ? { Port: tg.port } : {}),
            LoadBalancerArns: [tg.loadBalancerArn],
          })),
        };
      }
      case 'DescribeTags': {
        // The ownership check before a registration; like AWS, one unknown ARN fails the call.
        const arns = (input.ResourceArns ?? []) as string[];
        const groups = [...this.targetGroups.values()];
        return {
          TagDescriptions: arns.map((arn) => {
            const tg = groups.find((g) => g.arn === arn || g.loadBalancerArn === arn);
            if (tg === undefined) throw notFound(arn);
            return {
              ResourceArn: arn,
              Tags: [
                { Key: ownershipTags.cluster, Value: this.clusterName },
                { Key: ownershipTags.service, Value: tg.serviceKey },
                { Key: ownershipTags.serviceUid, Value: tg.serviceUid },
              ],
            };
          }),
        };
      }
      case 'GetResources': {
        const filters = (input.TagFilters ?? []) as { Key?: string; Values?: string[] }[];
        const uid = filters.find((f) => f.Key === ownershipTags.serviceUid)?.Values?.[0];
        const groups = [...this.targetGroups.values()].filter(
          (tg) => uid === undefined || tg.serviceUid === uid,
        );
        const arns = [...new Set(groups.flatMap((tg) => [tg.loadBalancerArn, tg.arn]))].map(
          (ResourceARN) => ({
            ResourceARN,
            Tags: [{ Key: ownershipTags.serviceUid, Value: uid ?? '' }],
          }),
        );
        return { ResourceTagMappingList: arns, PaginationToken: '' };
      }
      default:
        throw new Error(`bench fake AWS: ${operation} is not implemented`);
    }
  }
}

export interface ClientStats {
  /** SDK retries after a throttling error: none since issue 37 (throttling goes back to SQS). */
  retries: number;
  /** Calls throttled by AWS and handed back to the queue (a RequeueAfterError, not a failure). */
  exhausted: number;
  /** Virtual ms calls slept on this instance's limiter (each sleep within the bound). */
  limiterWaitMs: number;
}

/**
 * The NLB provider's clients inside one Lambda instance, as createRuntime wires them: every ELBv2
 * attempt passes the per-process limiter (functions/aws/process-limiter.ts, the real class on
 * virtual time) or, for registrations, the shared budget when there is one; a call either limit
 * would hold past the bound ends with RequeueAfterError. The SDK retry strategy
 * (functions/aws/bounded-retry.ts) does not retry throttling: the throttled call fails, and the
 * provider turns it into a requeue.
 */
export class FakeAwsClients {
  readonly stats: ClientStats = { retries: 0, exhausted: 0, limiterWaitMs: 0 };
  private readonly limiter: ProcessRateLimiter;

  constructor(
    private readonly account: FakeAwsAccount,
    clock: VirtualClock,
    /** Kept for the scenarios' seeding; the retry strategy draws no jitter on throttling. */
    _random: () => number,
    /** The shared registration budget, as addRateLimits is given it; none: per-process only. */
    private readonly budget?: RegistrationBudget,
  ) {
    this.limiter = new ProcessRateLimiter({
      nowMs: () => clock.now().getTime(),
      sleep: (ms) => {
        this.stats.limiterWaitMs += ms;
        return clock.sleep(ms);
      },
    });
  }

  /** As the provider wants them; only `send` is ever called. */
  asNlbClients(): NlbClients {
    const client = (service: ServiceName) => ({
      send: (command: object) => this.send(service, command),
    });
    const elbv2 = client('elbv2');
    if (this.budget !== undefined) attachRegistrationBudget(elbv2, this.budget);
    return {
      elbv2: elbv2 as unknown as ElasticLoadBalancingV2Client,
      ec2: client('ec2') as unknown as EC2Client,
      tagging: client('tagging') as unknown as ResourceGroupsTaggingAPIClient,
    };
  }

  private async send(service: ServiceName, command: object): Promise<unknown> {
    const operation = operationOf(command);
    // As addRateLimits: registrations book a slot on the shared budget, everything else passes
    // the per-process limiter; a RequeueAfterError from either ends the call, unretried.
    if (service === 'elbv2' && this.budget !== undefined && registration.test(operation)) {
      await this.budget.take(operation);
    } else if (service === 'elbv2') await this.limiter.take(operation);
    try {
      return await this.account.attempt(service, command);
    } catch (error) {
      if (isThrottling(error)) this.stats.exhausted++;
      throw error;
    }
  }
}
