import { quoted } from '../../core/echo';
import { alpnPolicies, type AnnotationDefinition } from './annotation-types';
import {
  awsName,
  bareRecord,
  isAlpnPolicy,
  joinOr,
  keyValues,
  list,
  listenerAttributeRules,
  listenerAttributesPrefix,
  listenerSuffix,
} from './annotation-values';

/** The annotations of TLS and listeners: certificates, ports, policies, backend protocol, ALPN, listener attributes, in the order docs/annotations.md lists them. */
export const listenerAnnotations: readonly AnnotationDefinition[] = [
  {
    name: awsName('ssl-cert'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'differs: one certificate only there',
    },
    values: 'comma-separated ACM or IAM certificate ARNs; the first is the default certificate',
    default: 'none (no TLS)',
    mutability: 'in place',
    description: 'Turns the TLS ports into TLS listeners with these certificates.',
    apply: (value, o) => {
      const arns = list(value);
      const bad = arns.find(
        (arn) =>
          !/^arn:aws[a-z-]*:(acm|iam):[a-z0-9-]*:\d{12}:(certificate|server-certificate)\/.+$/.test(
            arn,
          ),
      );
      if (arns.length === 0 || bad !== undefined)
        return `${quoted(bad ?? value)} is not an ACM or IAM certificate ARN`;
      o.certificateArns = arns;
      return undefined;
    },
  },
  {
    name: awsName('ssl-ports'),
    compared: {
      albc: 'differs: `*` matches no port there; here it means every port',
      cloudProviderAws: 'same',
    },
    values: 'comma-separated Service port numbers or names, or `*`',
    default: 'every port, when a certificate is set',
    mutability: 'in place',
    description: 'Which ports get TLS listeners.',
    apply: (value, o) => {
      const ports = list(value);
      if (ports.length === 0) return 'must name at least one port';
      if (!ports.includes('*')) o.sslPorts = ports;
      return undefined;
    },
  },
  {
    name: awsName('ssl-negotiation-policy'),
    compared: {
      albc: 'differs: default `ELBSecurityPolicy-2016-08` there',
      cloudProviderAws: "differs: AWS's default policy there",
    },
    values: 'an ELBv2 security policy name',
    default: 'the deployment default (`ELBSecurityPolicy-TLS13-1-2-2021-06`)',
    mutability: 'in place',
    description: 'TLS security policy of the TLS listeners.',
    apply: (value, o) => {
      if (!/^[A-Za-z0-9-]+$/.test(value)) return 'must be a security policy name';
      o.sslPolicy = value;
      return undefined;
    },
  },
  {
    name: awsName('backend-protocol'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'same (its `http` and `https` values are for Classic Load Balancers)',
    },
    values: '`tcp` | `ssl`',
    default: '`tcp`',
    mutability: 'replaces target groups (make-before-break)',
    description: '`ssl` makes TLS ports re-encrypt to the nodes (TLS target groups).',
    apply: (value, o) => {
      if (value !== 'tcp' && value !== 'ssl') return 'must be "tcp" or "ssl"';
      o.backendProtocol = value;
      return undefined;
    },
  },
  {
    name: awsName('alpn-policy'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws has no ALPN annotation',
    },
    values: alpnPolicies.map((p) => `\`${p}\``).join(' | '),
    default: 'AWS default (`None`), not reconciled while unset',
    mutability: 'in place',
    description:
      'ALPN policy of the TLS listeners (those the `ssl-ports` annotation selects); other listeners ignore it, as in aws-load-balancer-controller.',
    apply: (value, o) => {
      if (!isAlpnPolicy(value)) return `must be one of ${joinOr(alpnPolicies)}`;
      o.alpnPolicy = value;
      return undefined;
    },
  },
  {
    name: `${listenerAttributesPrefix}<PROTOCOL>-<PORT>`,
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws has no listener attributes annotation',
    },
    namePrefix: listenerAttributesPrefix,
    values: `\`key=value,...\` with keys ${[...listenerAttributeRules]
      .map(([key, r]) => `\`${key}\` (${r.rule}; ${r.protocols.join(', ')} listeners)`)
      .join(', ')}`,
    default: 'AWS defaults, not reconciled while unset',
    mutability: 'in place',
    description:
      'Attributes of one listener, named by its protocol (`TCP`, `UDP`, `TLS` or `TCP_UDP`, as the listener has it) and port, e.g. `…listener-attributes.TCP-80: tcp.idle_timeout.seconds=600`. A protocol and port the Service has no listener for is an error.',
    apply: (value, o, name) => {
      const listener = listenerSuffix(name.slice(listenerAttributesPrefix.length));
      if (listener === undefined) {
        return 'the name must end in <PROTOCOL>-<PORT>, with TCP, UDP, TLS or TCP_UDP and a port from 1 to 65535';
      }
      const attributes = keyValues(value);
      if (typeof attributes === 'string') return attributes;
      if (attributes.size === 0) return 'must list at least one key=value';
      for (const [key, attributeValue] of attributes) {
        const rule = listenerAttributeRules.get(key);
        if (rule === undefined) return `unsupported attribute ${quoted(key)}`;
        if (!rule.valid(attributeValue)) {
          return `invalid value ${quoted(attributeValue)} for ${key}: must be ${rule.rule}`;
        }
        if (!rule.protocols.includes(listener.protocol)) {
          return `AWS allows ${key} only on ${rule.protocols.join(', ')} listeners`;
        }
      }
      o.listenerAttributes = new Map([
        ...(o.listenerAttributes ?? []),
        [`${listener.protocol}-${listener.port}`, bareRecord(attributes)],
      ]);
      return undefined;
    },
  },
];
