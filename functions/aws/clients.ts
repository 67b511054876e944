import type { EC2Client } from '@aws-sdk/client-ec2';
import type { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { ResourceGroupsTaggingAPIClient } from '@aws-sdk/client-resource-groups-tagging-api';
import type {
  FinalizeHandler,
  FinalizeHandlerArguments,
  HandlerExecutionContext,
  MetadataBearer,
} from '@smithy/types';
import pThrottle from 'p-throttle';
import { RequeueAfterError } from '../core/errors';
import type { RegistrationBudget } from './registration-budget';

/** The AWS clients the NLB provider uses. */
export interface NlbClients {
  readonly elbv2: ElasticLoadBalancingV2Client;
  readonly ec2: EC2Client;
  /**
   * The tagging API, or a function that makes it on first use: only deletions and the sweep's
   * orphan search need it, so a cold start does not load it.
   */
  readonly tagging:
    ResourceGroupsTaggingAPIClient | (() => Promise<ResourceGroupsTaggingAPIClient>);
}

/**
 * Client-side rate limits per ELBv2 API family, below AWS's token buckets (the values the AWS Load
 * Balancer Controller settled on, PR #4641, with Describe kept conservative). They bound one
 * process; the event source mapping's maximum concurrency bounds the fleet, and registrations,
 * which all Services' host updates compete for, share one budget across instances
 * (registration-budget.ts) when one is given.
 */
const elbv2Families: readonly { readonly pattern: RegExp; readonly perSecond: number }[] = [
  { pattern: /^(Register|Deregister)Targets/, perSecond: 4 },
  { pattern: /^(Modify|Set|Add|Remove)/, perSecond: 3 },
  { pattern: /^Describe/, perSecond: 10 },
  { pattern: /./, perSecond: 5 },
];

const registrationFamily = /^(Register|Deregister)Targets$/;

/**
 * Throttles every attempt (retries included) of each API family of an ELBv2 client. With a budget,
 * each RegisterTargets/DeregisterTargets attempt books its slot there instead; a budget booked past
 * its horizon fails the call with RequeueAfterError (the SDK does not retry it), and a budget that
 * cannot be reached leaves the decision to the per-process limiter.
 */
export function addRateLimits(
  client: ElasticLoadBalancingV2Client,
  budget?: RegistrationBudget,
): void {
  const throttles = elbv2Families.map((family) => ({
    ...family,
    gate: pThrottle({ limit: family.perSecond, interval: 1000 })(() => Promise.resolve()),
  }));
  client.middlewareStack.add(
    (next: FinalizeHandler<object, MetadataBearer>, context: HandlerExecutionContext) =>
      async (args: FinalizeHandlerArguments<object>) => {
        const operation = (context.commandName ?? '').replace(/Command$/, '');
        const family = throttles.find((t) => t.pattern.test(operation));
        if (budget !== undefined && registrationFamily.test(operation)) {
          const shared = await budget.take(operation).then(
            () => true,
            (error: unknown) => {
              if (error instanceof RequeueAfterError) throw error;
              return false;
            },
          );
          if (shared) return next(args);
        }
        if (family !== undefined) await family.gate();
        return next(args);
      },
    { step: 'finalizeRequest', priority: 'low', name: 'elbv2RateLimit' },
  );
}
