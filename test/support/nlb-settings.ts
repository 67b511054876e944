import type { ProviderSettings } from '../../functions/nlb/model/desired';

/** Provider settings for unit tests of the NLB model. */
export const testProviderSettings: ProviderSettings = {
  clusterName: 'c1',
  vpcId: 'vpc-1',
  backendSecurityGroupId: 'sg-backend',
  defaultScheme: 'internal',
  defaultSslPolicy: 'ELBSecurityPolicy-TLS13-1-2-2021-06',
  defaultTags: {},
};
