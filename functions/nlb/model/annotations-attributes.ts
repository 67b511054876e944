import { joinProblems, quoted } from '../../core/echo';
import { loadBalancerAttributeRules } from './load-balancer-attributes';
import { tagProblems } from './tag-rules';
import { type AnnotationDefinition } from './annotation-types';
import {
  attributeAlias,
  awsName,
  bareRecord,
  booleanValue,
  integerIn,
  keyValues,
  list,
  targetGroupAttributeProblem,
  targetGroupAttributeRules,
  targetGroupAttributesPrefix,
} from './annotation-values';

/** The annotations of load balancer and target group attributes, tags, proxy protocol, ICMP, TCP_UDP listeners, in the order docs/annotations.md lists them. */
export const attributeAnnotations: readonly AnnotationDefinition[] = [
  {
    name: awsName('attributes'),
    compared: {
      albc: 'same',
      cloudProviderAws:
        'not supported: cloud-provider-aws has only the cross-zone and access-log annotations',
    },
    values: `\`key=value,...\` with keys ${[...loadBalancerAttributeRules.keys()]
      .map((k) => `\`${k}\``)
      .join(', ')}`,
    default: 'AWS defaults, not reconciled while unset',
    mutability: 'in place',
    description:
      'Load balancer attributes. Only the keys listed are reconciled: a key removed from the list keeps the value it had. With `deletion_protection.enabled=true` deleting the Service (or dropping its LoadBalancer type) stops with a Warning and keeps the NLB and the finalizer until the annotation is removed or set to `false`. `access_logs.s3.enabled=true` needs `access_logs.s3.bucket`. Tenant policy: `accessLogBuckets`, `accessLogPrefixes`, `maxSecondaryIpsPerSubnet`; under `internetFacing: false`, `ipv6.deny_all_igw_traffic=false` on a dualstack NLB counts as internet-facing.',
    apply: (value, o) => {
      const attributes = keyValues(value);
      if (typeof attributes === 'string') return attributes;
      for (const [key, attributeValue] of attributes) {
        const rule = loadBalancerAttributeRules.get(key);
        if (rule === undefined) return `unsupported attribute ${quoted(key)}`;
        if (!rule(attributeValue)) return `invalid value ${quoted(attributeValue)} for ${key}`;
      }
      o.loadBalancerAttributes = attributes;
      return undefined;
    },
  },
  attributeAlias('cross-zone-load-balancing-enabled', 'Load balancing across Availability Zones.', {
    albc: 'same (deprecated there in favour of the attributes annotation)',
    cloudProviderAws:
      "differs: without it cloud-provider-aws forces cross-zone off; here AWS's value is left alone",
  }),
  attributeAlias('access-log-enabled', 'Access logs to S3 (needs a bucket).', {
    albc: 'same (deprecated there in favour of the attributes annotation)',
    cloudProviderAws:
      "differs: without it cloud-provider-aws forces access logs off; here AWS's value is left alone",
  }),
  attributeAlias('access-log-s3-bucket-name', 'S3 bucket of the access logs.', {
    albc: 'same (deprecated there in favour of the attributes annotation)',
    cloudProviderAws: 'same',
  }),
  attributeAlias('access-log-s3-bucket-prefix', 'Prefix of the access logs in their bucket.', {
    albc: 'same (deprecated there in favour of the attributes annotation)',
    cloudProviderAws: 'same',
  }),
  {
    name: awsName('additional-resource-tags'),
    compared: {
      albc: 'same',
      cloudProviderAws:
        'differs: set at creation only there, never reconciled; keys without `=value` are accepted there',
    },
    values:
      "`key=value,key2=value2`: at most 45 tags with the deployment's, keys ≤ 128 and values ≤ 256 characters",
    default: 'none',
    mutability: 'in place',
    description:
      "Extra tags on every resource created for the Service. Ownership keys (`aws:`, `kubernetes.io/`, `elbv2.k8s.aws/`, `service.k8s.aws/`, `ingress.k8s.aws/`, `KubernetesCluster`, this controller's `serverless-service-controller.io/`, in any letter case) are refused.",
    apply: (value, o) => {
      const tags = keyValues(value);
      if (typeof tags === 'string') return tags;
      const problems = tagProblems(tags);
      if (problems.length > 0) return joinProblems(problems);
      o.additionalTags = bareRecord(tags);
      return undefined;
    },
  },
  {
    name: awsName('target-group-attributes'),
    compared: {
      albc: 'differs: keys and values are checked before any AWS call here; `proxy_protocol_v2.enabled` is left as AWS has it while unset, where it is forced to `false` there',
      cloudProviderAws:
        'differs: cloud-provider-aws accepts only `preserve_client_ip.enabled` and `proxy_protocol_v2.enabled`',
    },
    values: `\`key=value,...\` with keys ${[...targetGroupAttributeRules.keys()]
      .map((k) => `\`${k}\``)
      .join(', ')}`,
    default: 'AWS defaults, not reconciled while unset',
    mutability: 'in place',
    description: 'Target group attributes for every target group of the Service.',
    apply: (value, o) => {
      const attributes = keyValues(value);
      if (typeof attributes === 'string') return attributes;
      const problem = targetGroupAttributeProblem(attributes, false);
      if (problem !== undefined) return problem;
      o.targetGroupAttributes = bareRecord([
        ...Object.entries(o.targetGroupAttributes),
        ...attributes,
      ]);
      return undefined;
    },
  },
  {
    name: `${targetGroupAttributesPrefix}<PORT>`,
    namePrefix: targetGroupAttributesPrefix,
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws has no per-port target group attributes',
    },
    values: 'as `target-group-attributes`; an empty value keeps the value for all ports',
    default: 'the `target-group-attributes` values',
    mutability: 'in place',
    description:
      'Target group attributes of one Service port, e.g. `…target-group-attributes.443: deregistration_delay.timeout_seconds=120`, laid over `target-group-attributes` for that port. A port the Service does not have is an error.',
    apply: (value, o, name) => {
      const port = integerIn(name.slice(targetGroupAttributesPrefix.length), 1, 65535);
      if (port === undefined) return 'the name must end in a Service port number from 1 to 65535';
      const attributes = keyValues(value);
      if (typeof attributes === 'string') return attributes;
      if (attributes.size === 0) return 'must list at least one key=value';
      const problem = targetGroupAttributeProblem(attributes, true);
      if (problem !== undefined) return problem;
      o.targetGroupAttributesByPort = new Map([
        ...(o.targetGroupAttributesByPort ?? []),
        [port, bareRecord(attributes)],
      ]);
      return undefined;
    },
  },
  {
    name: awsName('proxy-protocol'),
    compared: {
      albc: 'same',
      cloudProviderAws:
        'not supported for NLBs: Classic Load Balancers only there (NLBs use `proxy_protocol_v2.enabled` in the target group attributes)',
    },
    values: '`*`',
    default: 'off',
    mutability: 'in place',
    description: 'Proxy protocol v2 on every target group.',
    apply: (value, o) => {
      if (value !== '*') return 'must be "*"';
      o.proxyProtocol = true;
      return undefined;
    },
  },
  {
    name: awsName('proxy-protocol-per-target-group'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws has no per-port proxy protocol',
    },
    values: 'comma-separated Service port numbers',
    default: 'unset',
    mutability: 'in place',
    description:
      'Proxy protocol v2 on the target groups of the listed Service ports, and off on all others (over the target-group-attributes annotation). `proxy-protocol: "*"` wins over it. A port the Service does not have is ignored, as in aws-load-balancer-controller.',
    apply: (value, o) => {
      const ports = list(value).map((port) => integerIn(port, 1, 65535));
      if (ports.length === 0 || ports.includes(undefined))
        return 'must be Service port numbers from 1 to 65535, separated by commas';
      o.proxyProtocolPorts = ports.filter((port) => port !== undefined);
      return undefined;
    },
  },
  {
    name: awsName('enable-icmp-for-path-mtu-discovery'),
    compared: {
      albc: 'differs: on by default here; there the ICMP rules are added only with `on`',
      cloudProviderAws:
        'differs: cloud-provider-aws has no annotation and adds the ICMP rule to the node security groups',
    },
    values: '`on` | `off`',
    default: '`on`',
    mutability: 'in place',
    description:
      'Whether the managed security group lets path MTU discovery through from each source range: ICMP "fragmentation needed" (type 3, code 4), and ICMPv6 "packet too big" (type 2) for IPv6 ranges. Without it, clients behind a smaller MTU can hang on large responses, so it is on unless turned off.',
    apply: (value, o) => {
      if (value !== 'on' && value !== 'off') return 'must be "on" or "off"';
      o.pathMtuDiscovery = value === 'on';
      return undefined;
    },
  },
  {
    name: awsName('enable-tcp-udp-listener'),
    compared: {
      albc: 'differs: TCP and UDP on one port become a `TCP_UDP` listener here without it; there only with `true`',
      cloudProviderAws: 'not supported: cloud-provider-aws refuses mixed protocols',
    },
    values: '`true` | `false`',
    default: 'unset',
    mutability: 'n/a',
    description:
      'Accepted for compatibility: TCP and UDP on the same port always become one `TCP_UDP` listener here.',
    apply: (value) => (booleanValue(value) === undefined ? 'must be "true" or "false"' : undefined),
  },
];
