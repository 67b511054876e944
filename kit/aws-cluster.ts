import { EC2Client } from '@aws-sdk/client-ec2';
import { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import {
  GetResourcesCommand,
  ResourceGroupsTaggingAPIClient,
} from '@aws-sdk/client-resource-groups-tagging-api';
import { callerRoleOption } from '../functions/aws/caller-role';
import { addRateLimits, type NlbClients } from '../functions/aws/clients';
import { boundedRetry } from '../functions/aws/bounded-retry';
import type { ProviderSettings } from '../functions/nlb/model/desired';
import { ownershipTags } from '../functions/nlb/model/naming';
import type { Host } from '../functions/core/hosts';
import { AwsCallRecorder } from './aws-calls';
import { createSimulatedNetwork } from '../functions/local/aws-resources';
import { MotoAccount, testRegion } from './moto';

export const testClusterName = 'test-cluster';

export interface AwsCluster {
  readonly account: MotoAccount;
  /** The provider's clients, built as the functions build theirs: hand these to controller code. */
  readonly clients: NlbClients;
  /**
   * The test's own clients on the same account and call recorder, for what a test reads or does by
   * hand: their calls are not the controller's, so the IAM recording does not evaluate them.
   */
  readonly testClients: Omit<NlbClients, 'tagging'> & {
    readonly tagging: ResourceGroupsTaggingAPIClient;
  };
  readonly recorder: AwsCallRecorder;
  readonly settings: ProviderSettings;
  readonly vpcId: string;
  readonly subnetIds: readonly string[];
  readonly hosts: readonly Host[];
  /** Starts more EC2 instances and returns them as hosts. */
  addHosts(count: number): Promise<Host[]>;
  /** What the tagging API finds with our cluster tag, as `resource-tag (service)` lines. */
  ownedResources(): Promise<string[]>;
}

/**
 * A private moto account set up like a cluster's VPC: two subnets in two zones tagged for both NLB
 * roles, a backend security group, and EC2 instances for nodes. The NLB clients are counted.
 */
export async function createAwsCluster(
  nodeCount = 3,
  endpoint?: string,
  account: MotoAccount = new MotoAccount(endpoint),
): Promise<AwsCluster> {
  const recorder = new AwsCallRecorder();
  // The provider's clients, built as the functions build theirs; a test's own calls use others.
  // Each its own retry strategy, as createRuntime gives them (its retry quota is per client).
  const provider = () => ({ ...callerRoleOption('functions'), ...boundedRetry(3, 'handBack') });
  const ec2 = recorder.attach(account.client(EC2Client, provider()));
  const elbv2 = recorder.attach(account.client(ElasticLoadBalancingV2Client, provider()));
  addRateLimits(elbv2);
  const tagging = recorder.attach(account.client(ResourceGroupsTaggingAPIClient, provider()));
  const testClients = {
    ec2: recorder.attach(account.client(EC2Client)),
    elbv2: recorder.attach(account.client(ElasticLoadBalancingV2Client)),
    tagging: recorder.attach(account.client(ResourceGroupsTaggingAPIClient)),
  };
  const setup = account.client(EC2Client);

  const network = await createSimulatedNetwork({ region: testRegion }, testClusterName, setup);
  const { vpcId, subnetIds } = network;
  const backend = { GroupId: network.backendSecurityGroupId };
  const addHosts = async (count: number): Promise<Host[]> =>
    (await network.addInstances(count)).map((node) => ({
      ...node,
      instanceId: node.providerID.slice(node.providerID.lastIndexOf('/') + 1),
    }));
  const hosts = await addHosts(nodeCount);
  recorder.reset();

  return {
    account,
    recorder,
    clients: { elbv2, ec2, tagging },
    testClients,
    settings: {
      clusterName: testClusterName,
      vpcId,
      backendSecurityGroupId: backend.GroupId,
      defaultScheme: 'internal',
      defaultSslPolicy: 'ELBSecurityPolicy-TLS13-1-2-2021-06',
      defaultTags: {},
    },
    vpcId,
    subnetIds,
    hosts,
    addHosts,
    ownedResources: async () => {
      const lookup = account.client(ResourceGroupsTaggingAPIClient);
      const found = await lookup.send(
        new GetResourcesCommand({
          TagFilters: [{ Key: ownershipTags.cluster, Values: [testClusterName] }],
        }),
      );
      return (found.ResourceTagMappingList ?? [])
        .map((m) => {
          const tags = Object.fromEntries((m.Tags ?? []).map((t) => [t.Key ?? '', t.Value ?? '']));
          return `${tags[ownershipTags.resource] ?? '?'} (${tags[ownershipTags.service] ?? '?'})`;
        })
        .sort();
    },
  };
}
