import { EC2Client } from '@aws-sdk/client-ec2';
import { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import { ResourceGroupsTaggingAPIClient } from '@aws-sdk/client-resource-groups-tagging-api';
import type {
  HandlerExecutionContext,
  InitializeHandler,
  InitializeHandlerArguments,
  MetadataBearer,
} from '@smithy/types';
import { addRateLimits, type NlbClients } from '../../../functions/aws/clients';
import type { InstrumentableClient } from '../../../kit/aws-calls';
import type { MotoAccount } from '../../../kit/moto';
import { boundedRetry } from '../../../functions/aws/bounded-retry';
import { callerRoleOption } from '../../../functions/aws/caller-role';

/**
 * NLB clients that "crash" the process after the k-th AWS call: that call reaches AWS (moto) and
 * does its work, but its answer never comes back, and no later call is made. The sync awaiting it
 * hangs forever, as if the function had been killed: no catch block, no state write after it.
 * `crashed` resolves when that happens; `calls` counts every call made.
 */
export function crashingClients(
  account: MotoAccount,
  crashAfter: number,
  /** Applied to each client first (a call recorder with injected faults, say). */
  also: <C extends InstrumentableClient>(client: C) => C = (client) => client,
) {
  const crash = crashAfterCalls(crashAfter, also);
  // As createRuntime builds them: each client its own bounded retry strategy (issue 37).
  const role = () => ({ ...callerRoleOption('functions'), ...boundedRetry(3, 'handBack') });
  const elbv2 = crash.instrument(account.client(ElasticLoadBalancingV2Client, role()));
  addRateLimits(elbv2);
  const clients: NlbClients = {
    elbv2,
    ec2: crash.instrument(account.client(EC2Client, role())),
    tagging: crash.instrument(account.client(ResourceGroupsTaggingAPIClient, role())),
  };
  return { clients, crashed: crash.crashed, calls: crash.calls };
}

/** AWS services whose calls count towards a crash: what the load balancer provider calls. */
const crashingServices = ['ElasticLoadBalancingV2', 'EC2', 'ResourceGroupsTaggingAPI'];

/**
 * The middleware behind crashingClients, for any client: the k-th call to ELBv2, EC2 or the
 * tagging API does its work, its answer is lost, and every later call of an instrumented client
 * (DynamoDB and SQS included: the process is dead) hangs for ever.
 */
export function crashAfterCalls(
  crashAfter: number,
  also: <C extends InstrumentableClient>(client: C) => C = (client) => client,
) {
  let calls = 0;
  let dead = false;
  let signal: () => void = () => undefined;
  const crashed = new Promise<void>((resolve) => {
    signal = resolve;
  });
  const never = new Promise<never>(() => undefined);
  const instrument = <C extends InstrumentableClient>(client: C): C => {
    also(client);
    client.middlewareStack.add(
      (next: InitializeHandler<object, MetadataBearer>, context: HandlerExecutionContext) =>
        async (args: InitializeHandlerArguments<object>) => {
          if (dead) return never;
          const service = (context.clientName ?? '').replace(/Client$/, '');
          // The k-th call's own middleware may call DynamoDB (the registration budget books its
          // slot there): the process dies with the k-th answer, not before.
          if (!crashingServices.includes(service)) return next(args);
          if (calls >= crashAfter) return never;
          const n = ++calls;
          // An answer or an error: either way it is lost if this is the call the process died in.
          const result = next(args);
          if (n !== crashAfter) return result;
          await result.catch(() => undefined);
          dead = true;
          signal();
          return never;
        },
      { step: 'initialize', priority: 'high', name: 'crashAfterCalls' },
    );
    return client;
  };
  return { instrument, crashed, calls: () => calls };
}
