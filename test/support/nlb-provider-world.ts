import { afterEach, beforeEach, expect } from 'vitest';
import { NlbProvider } from '../../functions/nlb/nlb-provider';
import { createAwsCluster, type AwsCluster } from '../../kit/aws-cluster';

/** What one Service `default/web` with ports 80 and 443 owns, as `ownedResources` lists it. */
export const everythingOfWeb: readonly string[] = [
  'load-balancer (default/web)',
  'security-group (default/web)',
  'target-group:443 (default/web)',
  'target-group:80 (default/web)',
];

export interface NlbProviderWorld {
  /** A fresh moto account set up as a cluster's VPC, for the current test. */
  readonly cluster: AwsCluster;
  readonly provider: NlbProvider;
  /** What the test expects to be left in the account when it ends; nothing unless it says. */
  expectedLeft: readonly string[];
}

/**
 * Registers the hooks the NLB provider's integration tests share: before each test a new cluster
 * account and a provider on it; after each, unless `checkLeftovers` is false, a check that the
 * account holds exactly `expectedLeft`, so no test leaks a resource unnoticed. Call it at the top
 * of a file; hooks a file adds after it run after its set-up.
 */
export function useNlbProviderWorld(options: { checkLeftovers?: boolean } = {}): NlbProviderWorld {
  let current: { cluster: AwsCluster; provider: NlbProvider } | undefined;
  let expectedLeft: readonly string[] = [];
  const started = () => {
    if (current === undefined) throw new Error('the NLB provider world is set up before each test');
    return current;
  };
  beforeEach(async () => {
    const cluster = await createAwsCluster();
    current = { cluster, provider: new NlbProvider(cluster.clients, cluster.settings) };
    expectedLeft = [];
  });
  if (options.checkLeftovers !== false) {
    afterEach(async () => {
      expect(await started().cluster.ownedResources()).toEqual([...expectedLeft].sort());
    });
  }
  return {
    get cluster() {
      return started().cluster;
    },
    get provider() {
      return started().provider;
    },
    get expectedLeft() {
      return expectedLeft;
    },
    set expectedLeft(resources) {
      expectedLeft = resources;
    },
  };
}
