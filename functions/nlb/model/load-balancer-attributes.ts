import { joinProblems, quoted } from '../../core/echo';
import { TerminalError } from '../../core/errors';
import { attributesAnnotation } from '../../core/deletion-protection';

const prefix = 'service.beta.kubernetes.io/aws-load-balancer-';

const isBoolean = (v: string) => v === 'true' || v === 'false';

/**
 * Network Load Balancer attributes users may set, with their value rules, as the ELBv2 API
 * reference lists them for NLBs (LoadBalancerAttribute). A Map, so a key such as `constructor`
 * is simply not found.
 */
export const loadBalancerAttributeRules = new Map<string, (v: string) => boolean>([
  ['deletion_protection.enabled', isBoolean],
  ['load_balancing.cross_zone.enabled', isBoolean],
  ['access_logs.s3.enabled', isBoolean],
  // S3 bucket naming rules: 3–63 lowercase letters, digits, dots and hyphens.
  ['access_logs.s3.bucket', (v) => /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(v)],
  // AWS adds `AWSLogs/…` after the prefix itself and refuses a prefix that contains it.
  [
    'access_logs.s3.prefix',
    (v) => v.length <= 1024 && !v.includes('AWSLogs') && !v.startsWith('/'),
  ],
  ['ipv6.deny_all_igw_traffic', isBoolean],
  [
    'dns_record.client_routing_policy',
    (v) =>
      [
        'any_availability_zone',
        'availability_zone_affinity',
        'partial_availability_zone_affinity',
      ].includes(v),
  ],
  ['zonal_shift.config.enabled', isBoolean],
  ['secondary_ips.auto_assigned.per_subnet', (v) => /^[0-7]$/.test(v)],
]);

/** The legacy annotations that stand for one attribute each, as the built-in controller named them. */
export const attributeAliases: ReadonlyMap<string, string> = new Map([
  [`${prefix}cross-zone-load-balancing-enabled`, 'load_balancing.cross_zone.enabled'],
  [`${prefix}access-log-enabled`, 'access_logs.s3.enabled'],
  [`${prefix}access-log-s3-bucket-name`, 'access_logs.s3.bucket'],
  [`${prefix}access-log-s3-bucket-prefix`, 'access_logs.s3.prefix'],
]);

/**
 * The load balancer attributes a Service asks for, from the attributes annotation and the legacy
 * aliases (values already validated one by one). An alias and the annotation that disagree, or
 * access logs without a bucket, are a TerminalError: nothing is guessed.
 */
export function mergeLoadBalancerAttributes(
  listed: ReadonlyMap<string, string>,
  aliased: ReadonlyMap<string, { readonly annotation: string; readonly value: string }>,
): Record<string, string> {
  const problems: string[] = [];
  const merged = new Map(listed);
  for (const [key, { annotation, value }] of aliased) {
    const listedValue = listed.get(key);
    if (listedValue !== undefined && listedValue !== value) {
      problems.push(
        `annotation ${annotation} says ${quoted(value)} but ${attributesAnnotation} sets ${key}=${listedValue}; keep one of them`,
      );
    }
    merged.set(key, listedValue ?? value);
  }
  if (merged.get('access_logs.s3.enabled') === 'true' && !merged.get('access_logs.s3.bucket')) {
    problems.push(
      `access logs are enabled without a bucket: set access_logs.s3.bucket in ${attributesAnnotation} (or ${prefix}access-log-s3-bucket-name)`,
    );
  }
  if (problems.length > 0) throw new TerminalError(joinProblems(problems));
  const record = Object.create(null) as Record<string, string>;
  for (const [key, value] of [...merged].sort(([a], [b]) => a.localeCompare(b))) {
    record[key] = value;
  }
  return record;
}
