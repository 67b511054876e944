import { EC2Client } from '@aws-sdk/client-ec2';
import { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import { ResourceGroupsTaggingAPIClient } from '@aws-sdk/client-resource-groups-tagging-api';
import type { InitializeHandler, InitializeHandlerArguments, MetadataBearer } from '@smithy/types';
import { addRateLimits, type NlbClients } from '../../../functions/aws/clients';
import type { InstrumentableClient } from '../../support/aws-calls';
import type { MotoAccount } from '../../support/moto';

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
  let calls = 0;
  let signal: () => void = () => undefined;
  const crashed = new Promise<void>((resolve) => {
    signal = resolve;
  });
  const never = new Promise<never>(() => undefined);
  const instrument = <C extends InstrumentableClient>(client: C): C => {
    also(client);
    client.middlewareStack.add(
      (next: InitializeHandler<object, MetadataBearer>) =>
        async (args: InitializeHandlerArguments<object>) => {
          if (calls >= crashAfter) return never;
          const n = ++calls;
          // An answer or an error: either way it is lost if this is the call the process died in.
          const result = next(args);
          if (n !== crashAfter) return result;
          await result.catch(() => undefined);
          signal();
          return never;
        },
      { step: 'initialize', priority: 'high', name: 'crashAfterCalls' },
    );
    return client;
  };
  const elbv2 = instrument(account.client(ElasticLoadBalancingV2Client));
  addRateLimits(elbv2);
  const clients: NlbClients = {
    elbv2,
    ec2: instrument(account.client(EC2Client)),
    tagging: instrument(account.client(ResourceGroupsTaggingAPIClient)),
  };
  return { clients, crashed, calls: () => calls };
}
