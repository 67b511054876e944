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
import { budgetLaneOf } from '../core/registration-slots';
import {
  attachLaneBudgets,
  attachRegistrationBudget,
  markSendsCounted,
  noteSent,
  registrationScope,
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

/** The shared budgets an ELBv2 client books its calls on (none: the per-process limiter alone). */
export interface Elbv2Budgets {
  /** RegisterTargets and DeregisterTargets, in a key's sync or not. */
  readonly registration?: RegistrationBudget | undefined;
  /** Describe*, in a key's sync. */
  readonly describe?: RegistrationBudget | undefined;
  /** Every other ELBv2 call (Create*, Modify*, Delete*, Set*, tags), in a key's sync. */
  readonly change?: RegistrationBudget | undefined;
}

/** Lets a pass reserve and prebook its slots on `budgets` through the client it calls with. */
export function attachBudgets(client: object, budgets: Elbv2Budgets): void {
  if (budgets.registration !== undefined) attachRegistrationBudget(client, budgets.registration);
  attachLaneBudgets(client, {
    register: budgets.registration,
    deregister: budgets.registration,
    describe: budgets.describe,
    change: budgets.change,
  });
}

/** The budget an ELBv2 call books its slot on here and now; none: the per-process limiter's. */
export function budgetForCall(
  budgets: Elbv2Budgets,
  operation: string,
): RegistrationBudget | undefined {
  const lane = budgetLaneOf(operation);
  if (lane === 'register' || lane === 'deregister') return budgets.registration;
  const scope = registrationScope.getStore();
  if (scope === undefined || scope.paced.has(lane)) return undefined;
  return lane === 'describe' ? budgets.describe : budgets.change;
}

/**
 * Limits every attempt (retries included) of each API family of an ELBv2 client
 * (process-limiter.ts). With budgets, each attempt books its slot on the fleet's budget for its
 * family instead (registrations always; Describe* and changes within a key's sync, where the key
 * can keep a slot and come back for it; the sweep and node sync's own reads keep the per-process
 * limit). A slot too far off to wait for fails the call with RequeueAfterError (the SDK does not
 * retry it), and a budget that cannot be reached leaves the decision to the per-process limiter.
 * No attempt sleeps longer than `slotWaitBoundMs` for either.
 */
export function addRateLimits(
  client: ElasticLoadBalancingV2Client,
  budgets: Elbv2Budgets = {},
  timer?: BudgetTimer,
): void {
  const limiter = new ProcessRateLimiter(timer);
  attachBudgets(client, budgets);
  markSendsCounted(client);
  client.middlewareStack.add(
    (next: FinalizeHandler<object, MetadataBearer>, context: HandlerExecutionContext) =>
      async (args: FinalizeHandlerArguments<object>) => {
        const operation = (context.commandName ?? '').replace(/Command$/, '');
        const budget = budgetForCall(budgets, operation);
        if (budget !== undefined) {
          const shared = await budget.take(operation).then(
            () => true,
            (error: unknown) => {
              if (error instanceof RequeueAfterError) throw error;
              return false;
            },
          );
          if (shared) {
            noteSent(operation);
            return next(args);
          }
        }
        await limiter.take(operation);
        noteSent(operation);
        return next(args);
      },
    { step: 'finalizeRequest', priority: 'low', name: 'elbv2RateLimit' },
  );
}

/**
 * Counts the EC2 requests that may change AWS within a key's sync (`noteSent`): a pass that must
 * come back and sent none changed nothing, so its record need not be written again.
 */
export function countSentChanges(client: EC2Client): void {
  markSendsCounted(client);
  client.middlewareStack.add(
    (next: FinalizeHandler<object, MetadataBearer>, context: HandlerExecutionContext) =>
      (args: FinalizeHandlerArguments<object>) => {
        noteSent((context.commandName ?? '').replace(/Command$/, ''));
        return next(args);
      },
    { step: 'finalizeRequest', priority: 'low', name: 'countSentChanges' },
  );
}
