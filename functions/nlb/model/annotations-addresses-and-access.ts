import { quoted } from '../../core/echo';
import { parseNodeLabelSelector, targetNodeLabelsAnnotation } from '../../core/target-node-labels';
import { parseIPv6 } from './ipv6';
import { awsPrefix, type AnnotationDefinition } from './annotation-types';
import {
  awsName,
  booleanValue,
  legacySourceRanges,
  list,
  parseIPv4,
  securityGroupsPerLoadBalancer,
} from './annotation-values';

/** The annotations of addresses and access: Elastic IPs, private addresses, security groups, prefix lists, target selection, IP address type, source ranges, in the order docs/annotations.md lists them. */
const targetTypeConflict = `${awsPrefix}type: "nlb-ip" asks for ip targets and ${awsPrefix}nlb-target-type for instance targets; keep one`;

export const addressAndAccessAnnotations: readonly AnnotationDefinition[] = [
  {
    name: awsName('eip-allocations'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'same',
    },
    values: 'comma-separated Elastic IP allocation IDs, one per subnet',
    default: 'none (AWS-assigned addresses)',
    mutability: 'at creation only',
    description: 'Static public addresses of an internet-facing NLB.',
    apply: (value, o) => {
      const ids = list(value);
      const bad = ids.find((id) => !/^eipalloc-[0-9a-f]{8,17}$/.test(id));
      if (ids.length === 0 || bad !== undefined)
        return `${quoted(bad ?? value)} is not an Elastic IP allocation ID`;
      o.eipAllocations = ids;
      return undefined;
    },
  },
  {
    name: awsName('private-ipv4-addresses'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'same',
    },
    values: 'comma-separated IPv4 addresses, one per subnet',
    default: 'none (AWS-assigned addresses)',
    mutability: 'at creation only',
    description: 'Static private addresses of an internal NLB.',
    apply: (value, o) => {
      const ips = list(value);
      const bad = ips.find((ip) => parseIPv4(ip) === undefined);
      if (ips.length === 0 || bad !== undefined)
        return `${quoted(bad ?? value)} is not an IPv4 address`;
      o.privateIPv4Addresses = ips;
      return undefined;
    },
  },
  {
    name: awsName('security-groups'),
    values: 'comma-separated security group IDs (`sg-…`) or `Name` tag values, in the cluster VPC',
    default: 'none: a managed security group per NLB',
    mutability: 'in place',
    description:
      "The NLB's frontend security groups, attached instead of the managed one (which is detached and deleted). A name matches the `Name` tag, not the group name, and must match exactly one group in the cluster VPC. A group another owner's tags claim is refused, since its owner could not delete it while the NLB holds it: this controller's (any Service's or cluster's), EKS's (`aws:eks:*`, `eks:*`: the cluster security group), the AWS Load Balancer Controller's (`elbv2.k8s.aws/*`, `ingress.k8s.aws/*`, `service.k8s.aws/*`) and a cluster's (`kubernetes.io/cluster/<name>=owned`, `KubernetesCluster`, Cluster API's). These groups are never changed or deleted by the controller; source ranges and prefix lists are then ignored, as in aws-load-balancer-controller. The NLB also carries the cluster's backend security group when `manage-backend-security-group-rules` is `true`. Tenant policy: `securityGroups` and `securityGroupTags`, matched on the groups the values resolve to, not on the values as written.",
    compared: {
      albc: "differs: a group another owner's tags claim (the EKS cluster security group, another controller's) is refused here and attached there; for the nodes' rules set manage-backend-security-group-rules",
      cloudProviderAws:
        'differs: cloud-provider-aws takes it only with NLBSecurityGroupMode=Managed, and keeps node rules CIDR-based',
    },
    apply: (value, o) => {
      const groups = [...new Set(list(value))];
      if (groups.length === 0) return 'must name at least one security group';
      if (groups.length > securityGroupsPerLoadBalancer)
        return `names ${groups.length} security groups; an NLB takes at most ${securityGroupsPerLoadBalancer}`;
      const bad = groups.find((g) => !/^[\x20-\x7e]{1,255}$/.test(g));
      if (bad !== undefined) return `${quoted(bad)} is not a security group ID or Name tag`;
      o.securityGroups = groups;
      return undefined;
    },
  },
  {
    name: awsName('manage-backend-security-group-rules'),
    values: '`true` | `false`',
    default:
      '`false` with `security-groups`; ignored without it (the managed group always comes with the backend group)',
    mutability: 'in place',
    description:
      "With `security-groups`: `true` attaches the cluster's backend security group beside the user's groups, so the node security groups, which allow that group on the NodePort range (installed once per cluster), let the NLB's traffic and health checks in. `false` attaches only the user's groups: the user makes the node security groups allow them.",
    compared: {
      albc: 'differs: the node security group rules that allow the backend group are made once per cluster at install, not per Service',
      cloudProviderAws: 'not supported: cloud-provider-aws has no backend security group',
    },
    apply: (value, o) => {
      const enabled = booleanValue(value);
      if (enabled === undefined) return 'must be "true" or "false"';
      o.manageBackendSecurityGroupRules = enabled;
      return undefined;
    },
  },
  {
    name: awsName('security-group-prefix-lists'),
    values: 'comma-separated managed prefix list IDs (`pl-…`)',
    default: 'none',
    mutability: 'in place',
    description:
      "Managed prefix lists allowed in on every listener port of the managed security group, beside the source ranges. Without source ranges the default `0.0.0.0/0` is then left out, as in aws-load-balancer-controller. Ignored with `security-groups`. AWS counts each prefix list as its maximum number of entries against the group's rule quota; the controller counts it as one rule per port. Tenant policy: `securityGroupPrefixLists`.",
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws has no prefix list annotation',
    },
    apply: (value, o) => {
      const ids = [...new Set(list(value))];
      const bad = ids.find((id) => !/^pl-[0-9a-f]{8,17}$/.test(id));
      if (ids.length === 0 || bad !== undefined)
        return `${quoted(bad ?? value)} is not a managed prefix list ID such as pl-0123456789abcdef0`;
      o.securityGroupPrefixLists = ids.sort();
      return undefined;
    },
  },
  {
    name: awsName('type'),
    compared: {
      albc: 'same: `nlb-ip` is the legacy spelling of `nlb-target-type: ip`',
      cloudProviderAws:
        'differs: `external` hands the Service to another controller there, and no annotation means a Classic Load Balancer',
    },
    values: '`nlb` | `external` | `nlb-ip`',
    default: 'unset',
    mutability: 'n/a',
    description:
      'Accepted for compatibility with the other controllers; this controller always makes NLBs. `nlb-ip` asks for pod targets, as `nlb-target-type: ip` does.',
    apply: (value, o) => {
      if (value === 'nlb-ip') {
        if (o.targetType === 'instance') return targetTypeConflict;
        o.targetType = 'ip';
        return undefined;
      }
      return value === 'nlb' || value === 'external'
        ? undefined
        : 'only "nlb", "external" and "nlb-ip" are supported (Classic ELB is not)';
    },
  },
  {
    name: targetNodeLabelsAnnotation,
    compared: {
      albc: 'differs: at most 10 labels and 4,096 characters here (node sync is shared by every namespace), none there',
      cloudProviderAws:
        'differs: a key without a value (`key` or `key=`) matches any value of that label there; here `key` alone is an error and `key=` matches only an empty value',
    },
    values: 'comma-separated `key=value` node labels: at most 10, 4,096 characters',
    default: 'every eligible node',
    mutability: 'in place',
    description:
      'Only eligible nodes carrying every listed label become targets of this Service. A value that cannot be read is a terminal Warning, and the targets stay those of the last valid value (never every node). Node changes still cost one RegisterTargets (or DeregisterTargets) per affected target group, and only the Services whose selection changed get a host update.',
    apply: (value) => {
      const parsed = parseNodeLabelSelector(value);
      return 'problem' in parsed ? parsed.problem : undefined;
    },
  },
  {
    name: awsName('nlb-target-type'),
    compared: {
      albc: 'same values; `ip` targets come from EndpointSlices through the forwarder and the targets sync, without a TargetGroupBinding, and without the pod readiness gate',
      cloudProviderAws: 'not supported: instance targets only there, with no annotation',
    },
    values: '`instance` | `ip`',
    default: '`instance`',
    mutability: 'replaces target groups (make-before-break)',
    description:
      "`instance` sends traffic to every eligible node's NodePort, and kube-proxy forwards it. `ip` sends it straight to the Service's pods: one target group per port holds the IP of every ready endpoint of the Service's EndpointSlices, on the endpoint's port (the targetPort, a named one resolved per slice); terminating endpoints are deregistered first and drain through the target group's deregistration delay. With `ip`, nodes play no part: `externalTrafficPolicy` and `target-node-labels` do not apply, NodePorts are not needed (`allocateLoadBalancerNodePorts: false` is allowed), and the health check defaults to TCP on the traffic port for every protocol (instead of kube-proxy's health port). Client IP preservation is left at AWS's default for ip target groups (off for TCP and TLS, on for UDP), as in aws-load-balancer-controller; set `preserve_client_ip.enabled` in `target-group-attributes` to change it. The pods must accept the cluster's backend security group on their ports: list those ports in the stack's `podTargetPorts` setting, and it allows the backend group on them on the node security groups, which pods on the VPC CNI share (pods with security groups of their own need that rule from their owner). Switching between the two creates the new target groups, points the listeners at them and deletes the old ones; the NLB stays.",
    apply: (value, o) => {
      if (value !== 'instance' && value !== 'ip') return 'must be "instance" or "ip"';
      if (value === 'instance' && o.targetType === 'ip') return targetTypeConflict;
      o.targetType = value;
      return undefined;
    },
  },
  {
    name: awsName('ip-address-type'),
    values: '`ipv4` | `dualstack`',
    default: '`ipv4`',
    mutability: 'in place',
    description:
      'Whether clients reach the NLB over IPv4 only or over IPv4 and IPv6. `dualstack` needs subnets with an IPv6 CIDR: discovered subnets without one are passed over, named ones are an error. Source ranges may then be IPv6 CIDRs; without ranges the security group allows `0.0.0.0/0` and `::/0`. AWS refuses UDP and TCP_UDP listeners on a dualstack NLB without IPv6 source NAT, which is not supported, so such a Service is an error. Targets are still reached over IPv4 (instance targets).',
    compared: {
      albc: 'same (`dualstack-without-public-ipv4` is for ALBs in both)',
      cloudProviderAws: 'not supported: cloud-provider-aws makes IPv4 NLBs only',
    },
    apply: (value, o) => {
      if (value === 'dualstack-without-public-ipv4')
        return 'only Application Load Balancers support "dualstack-without-public-ipv4"; use "dualstack"';
      if (value !== 'ipv4' && value !== 'dualstack') return 'must be "ipv4" or "dualstack"';
      o.ipAddressType = value;
      return undefined;
    },
  },
  {
    name: awsName('ipv6-addresses'),
    values: "comma-separated IPv6 addresses, one in each subnet's IPv6 CIDR",
    default: 'none (AWS-assigned addresses)',
    mutability: 'at creation only',
    description:
      'Static IPv6 addresses of a dualstack NLB, either scheme. Each is matched to the subnet whose IPv6 CIDR holds it, so the order does not matter; every subnet needs exactly one.',
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws makes IPv4 NLBs only',
    },
    apply: (value, o) => {
      const ips = list(value);
      const bad = ips.find((ip) => parseIPv6(ip) === undefined);
      if (ips.length === 0 || bad !== undefined)
        return `${quoted(bad ?? value)} is not an IPv6 address`;
      o.ipv6Addresses = ips;
      return undefined;
    },
  },
  {
    name: legacySourceRanges,
    values: 'comma-separated IPv4 CIDRs, and IPv6 CIDRs on a dualstack NLB',
    default: '`0.0.0.0/0` (and `::/0` on a dualstack NLB)',
    mutability: 'in place',
    description: 'Client CIDRs allowed in when spec.loadBalancerSourceRanges is empty.',
    compared: {
      albc: 'same',
      cloudProviderAws: 'differs: IPv6 CIDRs are accepted only on dualstack NLBs, which it lacks',
    },
    apply: (value, o) => {
      o.sourceRanges = list(value);
      return undefined;
    },
  },
];
