import type { EC2Client } from '@aws-sdk/client-ec2';
import type { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { ResourceGroupsTaggingAPIClient } from '@aws-sdk/client-resource-groups-tagging-api';
import type {
  FinalizeHandler,
  FinalizeHandlerArguments,
  HandlerExecutionContext,
  MetadataBearer,
} from '@smithy/types';
import { RequeueAfterError } from '../core/errors';
import { ProcessRateLimiter } from './process-limiter';
import {
  attachRegistrationBudget,
  type BudgetTimer,
  type RegistrationBudget,
} from './registration-budget';

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

const registrationFamily = /^(Register|Deregister)Targets$/;

/**
 * Limits every attempt (retries included) of each API family of an ELBv2 client
 * (process-limiter.ts). With a budget, each RegisterTargets/DeregisterTargets attempt books its
 * slot there instead; a slot too far off to wait for fails the call with RequeueAfterError (the SDK
 * does not retry it), and a budget that cannot be reached leaves the decision to the per-process
 * limiter. No attempt sleeps longer than `slotWaitBoundMs` for either.
 */
export function addRateLimits(
  client: ElasticLoadBalancingV2Client,
  budget?: RegistrationBudget,
  timer?: BudgetTimer,
): void {
  const limiter = new ProcessRateLimiter(timer);
  if (budget !== undefined) attachRegistrationBudget(client, budget);
  client.middlewareStack.add(
    (next: FinalizeHandler<object, MetadataBearer>, context: HandlerExecutionContext) =>
      async (args: FinalizeHandlerArguments<object>) => {
        const operation = (context.commandName ?? '').replace(/Command$/, '');
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
        await limiter.take(operation);
        return next(args);
      },
    { step: 'finalizeRequest', priority: 'low', name: 'elbv2RateLimit' },
  );
}
