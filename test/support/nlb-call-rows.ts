/**
 * The ELBv2/EC2 calls of one Service's create (2 ports, 3 nodes), as the real provider makes them
 * against moto (bench/results/latest.md, "AWS calls per scenario"): what the bench's fake AWS must
 * serve the same way.
 */
export const createCalls: Readonly<Record<string, number>> = {
  DescribeSubnets: 1,
  DescribeLoadBalancers: 1,
  CreateSecurityGroup: 1,
  AuthorizeSecurityGroupIngress: 1,
  CreateTargetGroup: 2,
  DescribeTags: 1,
  RegisterTargets: 2,
  CreateLoadBalancer: 1,
  CreateListener: 2,
};
