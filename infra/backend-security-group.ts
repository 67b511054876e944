import { Stack, Token } from 'aws-cdk-lib';
import {
  CfnSecurityGroupEgress,
  CfnSecurityGroupIngress,
  SecurityGroup,
  type ISecurityGroup,
  type IVpc,
} from 'aws-cdk-lib/aws-ec2';
import {
  AwsCustomResource,
  AwsCustomResourcePolicy,
  PhysicalResourceId,
} from 'aws-cdk-lib/custom-resources';
import type { Construct } from 'constructs';
import { acknowledgeLookupFunction } from './nag-acknowledgements';
import type { ControllerSettings } from './settings-schema';

// Created in the construct's own scope, so their logical IDs are the construct's.

/**
 * One security group every NLB carries, allowed on the node security groups for the NodePort
 * range (and kube-proxy's health port), instead of a rule per Service on the nodes.
 */
export function backendSecurityGroup(
  scope: Construct,
  vpc: IVpc,
  settings: ControllerSettings,
): ISecurityGroup | undefined {
  // Without a rule on the nodes every target times out. On EKS the nodes carry the cluster
  // security group, read at deploy time; elsewhere the settings must name the groups.
  const nodeGroupIds =
    settings.nodeSecurityGroupIds.length > 0
      ? settings.nodeSecurityGroupIds
      : settings.kubernetesSecretArn === undefined
        ? [eksClusterSecurityGroupId(scope, settings.clusterName)]
        : [];
  if (nodeGroupIds.length === 0) return undefined;
  // A deploy-time cluster name (an eks.Cluster's) is left out: cdk-nag reads only a literal
  // description. A literal one stays as release 0.1 wrote it, since a new one replaces the group.
  const group = closedSecurityGroup(
    scope,
    'BackendSecurityGroup',
    vpc,
    Token.isUnresolved(settings.clusterName)
      ? 'NLBs of serverless-service-controller'
      : `NLBs of serverless-service-controller for ${settings.clusterName}`,
  );
  nodeGroupIds.forEach((nodeGroupId, index) => {
    new CfnSecurityGroupEgress(scope, `NlbToNodes${index}`, {
      groupId: group.securityGroupId,
      ipProtocol: '-1',
      destinationSecurityGroupId: nodeGroupId,
      description: 'NodePorts and health checks on the nodes',
    });
    for (const protocol of ['tcp', 'udp'] as const) {
      new CfnSecurityGroupIngress(scope, `NodePortsFromNlb${index}${protocol}`, {
        groupId: nodeGroupId,
        ipProtocol: protocol,
        fromPort: 30000,
        toPort: 32767,
        sourceSecurityGroupId: group.securityGroupId,
        description: 'NodePorts from serverless-service-controller NLBs',
      });
    }
    settings.podTargetPorts.forEach((ports, rangeIndex) => {
      const [from = 0, to = from] = ports.split('-').map(Number);
      for (const protocol of ['tcp', 'udp'] as const) {
        new CfnSecurityGroupIngress(scope, `PodPortsFromNlb${index}r${rangeIndex}${protocol}`, {
          groupId: nodeGroupId,
          ipProtocol: protocol,
          fromPort: from,
          toPort: to,
          sourceSecurityGroupId: group.securityGroupId,
          description: 'Pod ports (ip targets) from serverless-service-controller NLBs',
        });
      }
    });
    new CfnSecurityGroupIngress(scope, `HealthFromNlb${index}`, {
      groupId: nodeGroupId,
      ipProtocol: 'tcp',
      fromPort: 10256,
      toPort: 10256,
      sourceSecurityGroupId: group.securityGroupId,
      description: 'kube-proxy health from serverless-service-controller NLBs',
    });
  });
  return group;
}

/** The EKS cluster security group, which every managed node carries, from eks:DescribeCluster at deploy. */
function eksClusterSecurityGroupId(scope: Construct, clusterName: string): string {
  const path = 'cluster.resourcesVpcConfig.clusterSecurityGroupId';
  const lookup = new AwsCustomResource(scope, 'ClusterSecurityGroupLookup', {
    onUpdate: {
      service: 'EKS',
      action: 'DescribeCluster',
      parameters: { name: clusterName },
      physicalResourceId: PhysicalResourceId.of(`${clusterName}-cluster-security-group`),
      outputPaths: [path],
    },
    policy: AwsCustomResourcePolicy.fromSdkCalls({
      resources: [
        Stack.of(scope).formatArn({
          service: 'eks',
          resource: 'cluster',
          resourceName: clusterName,
        }),
      ],
    }),
    installLatestAwsSdk: false,
  });
  // CDK keeps the function behind every AwsCustomResource at the stack's top level.
  const provider = Stack.of(scope).node.tryFindChild(
    `AWS${AwsCustomResource.PROVIDER_FUNCTION_UUID.replace(/-/g, '')}`,
  );
  if (provider !== undefined) acknowledgeLookupFunction(provider);
  return lookup.getResponseField(path);
}

/** A security group with no outbound rule until one is added: egress is granted, not assumed. */
export function closedSecurityGroup(
  scope: Construct,
  id: string,
  vpc: IVpc,
  description: string,
): SecurityGroup {
  return new SecurityGroup(scope, id, { vpc, description, allowAllOutbound: false });
}
