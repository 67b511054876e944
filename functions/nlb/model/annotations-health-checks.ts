import { type AnnotationDefinition } from './annotation-types';
import { awsName, integerIn } from './annotation-values';

/** The annotations of the target groups' health checks, in the order docs/annotations.md lists them. */
export const healthCheckAnnotations: readonly AnnotationDefinition[] = [
  {
    name: awsName('healthcheck-protocol'),
    compared: {
      albc: 'differs: for UDP-only ports the default here is HTTP to kube-proxy (TCP on the traffic port there, which a UDP port cannot answer)',
      cloudProviderAws:
        'differs: for UDP-only ports the default here is HTTP to kube-proxy (TCP on the traffic port there, which a UDP port cannot answer)',
    },
    values: '`TCP` | `HTTP` | `HTTPS`',
    default: '`TCP`; `HTTP` for externalTrafficPolicy Local and for UDP-only ports',
    mutability: 'in place',
    description: 'Health check protocol of every target group.',
    apply: (value, o) => {
      const upper = value.toUpperCase();
      if (upper !== 'TCP' && upper !== 'HTTP' && upper !== 'HTTPS')
        return 'must be TCP, HTTP or HTTPS';
      o.healthCheck.protocol = upper;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-port'),
    compared: {
      albc: "differs: a named Service port is accepted there, only a number or `traffic-port` here; for UDP-only ports the default here is kube-proxy's 10256",
      cloudProviderAws: "differs: for UDP-only ports the default here is kube-proxy's 10256",
    },
    values: '`traffic-port` or a port number',
    default:
      '`traffic-port`; the healthCheckNodePort for externalTrafficPolicy Local; 10256 (kube-proxy) for UDP-only ports',
    mutability: 'in place',
    description: 'Port the health check connects to on each node.',
    apply: (value, o) => {
      if (value !== 'traffic-port' && integerIn(value, 1, 65535) === undefined) {
        return 'must be "traffic-port" or a port number from 1 to 65535';
      }
      o.healthCheck.port = value;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-path'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'same',
    },
    values: 'a path starting with `/`',
    default: '`/` (`/healthz` for externalTrafficPolicy Local and UDP-only ports)',
    mutability: 'in place',
    description: 'Path of HTTP and HTTPS health checks.',
    apply: (value, o) => {
      if (!value.startsWith('/') || value.length > 1024)
        return 'must start with "/" and be at most 1024 characters';
      o.healthCheck.path = value;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-interval'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'differs: default 30 s there, and a change replaces the target group',
    },
    values: '5–300 (seconds)',
    default: '10',
    mutability: 'in place',
    description: 'Seconds between health checks.',
    apply: (value, o) => {
      const n = integerIn(value, 5, 300);
      if (n === undefined) return 'must be a whole number of seconds from 5 to 300';
      o.healthCheck.intervalSeconds = n;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-timeout'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'differs: parsed but never sent to AWS there',
    },
    values: '2–120 (seconds)',
    default: '10 for TCP, 6 for HTTP(S)',
    mutability: 'in place',
    description: 'Seconds before a health check counts as failed.',
    apply: (value, o) => {
      const n = integerIn(value, 2, 120);
      if (n === undefined) return 'must be a whole number of seconds from 2 to 120';
      o.healthCheck.timeoutSeconds = n;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-healthy-threshold'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'same',
    },
    values: '2–10',
    default: '3 (2 for externalTrafficPolicy Local)',
    mutability: 'in place',
    description: 'Consecutive successes before a target is healthy.',
    apply: (value, o) => {
      const n = integerIn(value, 2, 10);
      if (n === undefined) return 'must be a whole number from 2 to 10';
      o.healthCheck.healthyThreshold = n;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-unhealthy-threshold'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'differs: sent to AWS there only when the healthy threshold changes too',
    },
    values: '2–10',
    default: '3 (2 for externalTrafficPolicy Local)',
    mutability: 'in place',
    description: 'Consecutive failures before a target is unhealthy.',
    apply: (value, o) => {
      const n = integerIn(value, 2, 10);
      if (n === undefined) return 'must be a whole number from 2 to 10';
      o.healthCheck.unhealthyThreshold = n;
      return undefined;
    },
  },
  {
    name: awsName('healthcheck-success-codes'),
    compared: {
      albc: 'same',
      cloudProviderAws: 'not supported: cloud-provider-aws has no such annotation',
    },
    values: 'HTTP codes, e.g. `200` or `200-399` or `200,204`',
    default: '`200-399`',
    mutability: 'in place',
    description: 'HTTP codes a healthy target answers with (HTTP and HTTPS checks).',
    apply: (value, o) => {
      const ranges = value.split(',').map((part) => part.split('-').map(Number));
      const valid =
        /^[2-5]\d\d(-[2-5]\d\d)?(,[2-5]\d\d(-[2-5]\d\d)?)*$/.test(value) &&
        ranges.every(([low = 0, high = low]) => low <= high);
      if (!valid) return 'must be HTTP codes from 200 to 599, as "200", "200-399" or "200,204"';
      o.healthCheck.successCodes = value;
      return undefined;
    },
  },
];
