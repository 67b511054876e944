import { quoted } from '../../core/echo';
import { attributeAliases, loadBalancerAttributeRules } from './load-balancer-attributes';
import {
  alpnPolicies,
  awsPrefix,
  type AlpnPolicy,
  type AnnotationComparison,
  type AnnotationDefinition,
} from './annotation-types';

// The value parsers and attribute rules the annotation registry's entries share.

export const legacySourceRanges = 'service.beta.kubernetes.io/load-balancer-source-ranges';

export const awsName = (suffix: string) => `${awsPrefix}${suffix}`;

/** An NLB takes at most this many security groups (the backend group counts too). */
export const securityGroupsPerLoadBalancer = 5;

export function list(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

export function integerIn(value: string, min: number, max: number): number | undefined {
  if (!/^\d+$/.test(value.trim())) return undefined;
  const n = Number(value.trim());
  return n >= min && n <= max ? n : undefined;
}

/**
 * `key=value,…` into a Map: user keys never become properties of a plain object, where
 * `__proto__` would vanish and `hasOwnProperty` would find Object.prototype's (issue 19).
 */
export function keyValues(value: string): Map<string, string> | string {
  const result = new Map<string, string>();
  for (const pair of list(value)) {
    const index = pair.indexOf('=');
    if (index <= 0) return `${quoted(pair)} is not key=value`;
    result.set(pair.slice(0, index).trim(), pair.slice(index + 1).trim());
  }
  return result;
}

/** A record without a prototype, for options read with plain property lookups downstream. */
export function bareRecord(
  entries: Iterable<readonly [string, string]> = [],
): Record<string, string> {
  const record = Object.create(null) as Record<string, string>;
  for (const [key, value] of entries) record[key] = value;
  return record;
}

export const booleanValue = (value: string): boolean | undefined =>
  value === 'true' ? true : value === 'false' ? false : undefined;

/**
 * Target group attributes users may set, with their value rules: a subset of the keys the ELBv2
 * API reference lists for Network Load Balancer target groups (TargetGroupAttribute). A Map, so
 * a key such as `constructor` or `hasOwnProperty` is simply not found.
 */

export const isAlpnPolicy = (value: string): value is AlpnPolicy =>
  (alpnPolicies as readonly string[]).includes(value);

/**
 * Listener attributes of Network Load Balancers (ELBv2 API reference, ListenerAttribute), with
 * the listener protocols AWS allows each on: the TCP idle timeout cannot be changed on TLS
 * listeners, and UDP listeners have no attributes.
 */
export const listenerAttributeRules = new Map<
  string,
  { readonly valid: (v: string) => boolean; readonly rule: string; readonly protocols: string[] }
>([
  [
    'tcp.idle_timeout.seconds',
    {
      valid: (v) => integerIn(v, 60, 6000) !== undefined,
      rule: 'a whole number of seconds from 60 to 6000',
      protocols: ['TCP'],
    },
  ],
]);

export const listenerAttributesPrefix = `${awsPrefix}listener-attributes.`;

/** `<PROTOCOL>-<PORT>` as aws-load-balancer-controller writes it: the listener's protocol, upper case. */
export function listenerSuffix(suffix: string): { protocol: string; port: number } | undefined {
  const match = /^(TCP|UDP|TLS|TCP_UDP)-(\d{1,5})$/.exec(suffix);
  const port = match?.[2] === undefined ? undefined : integerIn(match[2], 1, 65535);
  return match?.[1] === undefined || port === undefined ? undefined : { protocol: match[1], port };
}

export const targetGroupAttributeRules = new Map<string, (v: string) => boolean>([
  ['preserve_client_ip.enabled', (v) => booleanValue(v) !== undefined],
  ['proxy_protocol_v2.enabled', (v) => booleanValue(v) !== undefined],
  ['deregistration_delay.timeout_seconds', (v) => integerIn(v, 0, 3600) !== undefined],
  ['deregistration_delay.connection_termination.enabled', (v) => booleanValue(v) !== undefined],
  ['stickiness.enabled', (v) => booleanValue(v) !== undefined],
  ['stickiness.type', (v) => v === 'source_ip'],
  [
    'load_balancing.cross_zone.enabled',
    (v) => ['true', 'false', 'use_load_balancer_configuration'].includes(v),
  ],
  // Target group health thresholds; a count goes up to the targets a target group can hold.
  [
    'target_group_health.dns_failover.minimum_healthy_targets.count',
    (v) => v === 'off' || integerIn(v, 1, 1000) !== undefined,
  ],
  [
    'target_group_health.dns_failover.minimum_healthy_targets.percentage',
    (v) => v === 'off' || integerIn(v, 1, 100) !== undefined,
  ],
  [
    'target_group_health.unhealthy_state_routing.minimum_healthy_targets.count',
    (v) => integerIn(v, 1, 1000) !== undefined,
  ],
  [
    'target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage',
    (v) => v === 'off' || integerIn(v, 1, 100) !== undefined,
  ],
  // Network Load Balancers only: what happens to connections of a target that turns unhealthy.
  [
    'target_health_state.unhealthy.connection_termination.enabled',
    (v) => booleanValue(v) !== undefined,
  ],
  [
    'target_health_state.unhealthy.draining_interval_seconds',
    (v) => integerIn(v, 0, 360000) !== undefined,
  ],
]);

/** Problems with target group attributes as `key=value,…`; empty values allowed where they mean "keep". */
export function targetGroupAttributeProblem(
  attributes: ReadonlyMap<string, string>,
  allowEmpty: boolean,
): string | undefined {
  for (const [key, value] of attributes) {
    const rule = targetGroupAttributeRules.get(key);
    if (rule === undefined) return `unsupported attribute ${quoted(key)}`;
    if (!(allowEmpty && value === '') && !rule(value))
      return `invalid value ${quoted(value)} for ${key}`;
  }
  return undefined;
}

export const targetGroupAttributesPrefix = `${awsPrefix}target-group-attributes.`;

/**
 * A legacy annotation that sets one load balancer attribute: same value rules, and a terminal
 * error when it disagrees with the attributes annotation (checked when both are known).
 */
export function attributeAlias(
  suffix: string,
  description: string,
  compared: AnnotationComparison,
): AnnotationDefinition {
  const name = awsName(suffix);
  const key = attributeAliases.get(name) ?? '';
  const rule = loadBalancerAttributeRules.get(key) ?? (() => false);
  return {
    name,
    values: key.endsWith('.enabled') ? '`true` | `false`' : `as \`${key}\``,
    default: 'AWS default, not reconciled while unset',
    mutability: 'in place',
    description: `${description} Alias of \`${key}\` in the attributes annotation; the two must agree.`,
    compared,
    apply: (value, o) => {
      if (!rule(value))
        return key.endsWith('.enabled') ? 'must be "true" or "false"' : `invalid value for ${key}`;
      o.loadBalancerAttributeAliases ??= new Map();
      o.loadBalancerAttributeAliases.set(key, { annotation: name, value });
      return undefined;
    },
  };
}

export function joinOr(items: readonly string[]): string {
  return `${items.slice(0, -1).join(', ')} or ${items.at(-1) ?? ''}`;
}

/** The four octets of a dotted IPv4 address, or undefined. */
export function parseIPv4(text: string): number[] | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  const octets = parts.map((part) => (/^(0|[1-9]\d{0,2})$/.test(part) ? Number(part) : NaN));
  return octets.every((octet) => octet >= 0 && octet <= 255) ? octets : undefined;
}
