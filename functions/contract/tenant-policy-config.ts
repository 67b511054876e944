import * as z from 'zod/mini';
import './zod-messages';
import { patternSyntax } from '../nlb/model/tenant-policy';

/**
 * The `tenantPolicy` setting (docs/tenant-safety.md#tenant-policy): its own module so the
 * functions' configuration and the CDK settings check it with the same rules.
 */
const matching = (pattern: RegExp, message: string) => z.string().check(z.regex(pattern, message));

const labelValue = z.string().check(z.maxLength(63));
const labelKey = matching(
  /^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/,
  'a label key such as team or example.com/tier',
);

const requirement = z
  .strictObject({
    key: labelKey,
    operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']),
    values: z.optional(z.array(labelValue)),
  })
  .check(
    z.refine(
      (r) =>
        r.operator === 'In' || r.operator === 'NotIn'
          ? (r.values?.length ?? 0) > 0
          : r.values === undefined || r.values.length === 0,
      'In and NotIn need values; Exists and DoesNotExist take none',
    ),
  );

const selector = z
  .strictObject({
    matchLabels: z.optional(z.record(labelKey, labelValue)),
    matchExpressions: z.optional(z.array(requirement)),
  })
  .check(
    z.refine(
      (s) => Object.keys(s.matchLabels ?? {}).length + (s.matchExpressions?.length ?? 0) > 0,
      'give matchLabels or matchExpressions (an empty selector would match every namespace: use `default`)',
    ),
  );

/** What a rule may restrict; the default rule is this alone, with no selectors. */
const restrictions = {
  name: z.optional(
    matching(/^[A-Za-z0-9._ -]{1,63}$/, 'letters, digits, " ", ".", "_", "-", at most 63'),
  ),
  internetFacing: z.optional(z.boolean()),
  certificateArns: z.optional(
    z.array(
      matching(
        patternSyntax.certificateArn,
        'an ACM or IAM certificate ARN pattern such as arn:aws:acm:*:123456789012:certificate/*; "*" matches within one ":"-separated field',
      ),
    ),
  ),
  eipAllocations: z.optional(
    z.array(
      matching(
        patternSyntax.eipAllocation,
        'an Elastic IP allocation ID such as eipalloc-0123456789abcdef0 ("*" allowed)',
      ),
    ),
  ),
  securityGroups: z.optional(
    z.array(
      matching(
        patternSyntax.securityGroup,
        'a security group ID pattern such as sg-0123456789abcdef0 or sg-0ab* (matched against the group ID) or a Name tag pattern such as team-a-* not starting with sg- ("*" allowed; no ",")',
      ),
    ),
  ),
  securityGroupTags: z.optional(
    z.array(
      matching(
        patternSyntax.securityGroupTag,
        'a tag as key=value such as example.com/lb-tenant=team-a ("*" allowed in the value)',
      ),
    ),
  ),
  maxLoadBalancerServices: z.optional(z.int().check(z.gte(0), z.lte(100_000))),
  // An NLB has at most 50 listeners.
  maxListeners: z.optional(z.int().check(z.gte(1), z.lte(50))),
  requireSubnetRoleTag: z.optional(z.boolean()),
  securityGroupPrefixLists: z.optional(
    z.array(
      matching(
        patternSyntax.prefixList,
        'a managed prefix list ID such as pl-0123456789abcdef0 ("*" allowed)',
      ),
    ),
  ),
  accessLogBuckets: z.optional(
    z.array(
      matching(
        patternSyntax.accessLogBucket,
        'an S3 bucket name pattern such as logs-{namespace} or team-*-logs ("*" and {namespace} allowed)',
      ),
    ),
  ),
  accessLogPrefixes: z.optional(
    z.array(
      matching(
        patternSyntax.accessLogPrefix,
        'an access log prefix pattern such as {namespace}/* ("*" and {namespace} allowed; "" is the root of the bucket; no ",")',
      ),
    ),
  ),
  loadBalancerNames: z.optional(
    z.array(
      matching(
        patternSyntax.loadBalancerName,
        'a load balancer name pattern such as {namespace}-* (letters, digits, "-", "*" and {namespace})',
      ),
    ),
  ),
  // AWS takes 0 to 7 secondary addresses per subnet.
  maxSecondaryIpsPerSubnet: z.optional(z.int().check(z.gte(0), z.lte(7))),
};

const rule = z
  .strictObject({
    ...restrictions,
    namespaces: z.optional(
      z
        .array(
          matching(
            patternSyntax.namespace,
            'a namespace name, "*" matching any run of characters (team-*)',
          ),
        )
        .check(z.minLength(1)),
    ),
    namespaceSelector: z.optional(selector),
  })
  .check(
    z.refine(
      (r) => r.namespaces !== undefined || r.namespaceSelector !== undefined,
      'a rule needs namespaces or namespaceSelector (use `default` for every other namespace)',
    ),
  );

export const tenantPolicySchema = z.strictObject({
  rules: z._default(z.array(rule), []),
  default: z.optional(z.strictObject(restrictions)),
});

export type TenantPolicySetting = z.infer<typeof tenantPolicySchema>;

/**
 * What a valid policy still leaves open, said at `cdk synth` (a CDK warning) and when the
 * functions or `npm start` read their configuration (a log warning): rules without a `default`
 * fail open for every namespace no rule matches (issue 32, finding 4).
 */
export function tenantPolicyWarnings(policy: TenantPolicySetting | undefined): string[] {
  if (policy === undefined || policy.rules.length === 0 || policy.default !== undefined) return [];
  return [
    'tenantPolicy has rules but no `default`: every namespace that matches no rule (one created later, or one whose labels its tenant may change) has no restrictions at all. Add a `default`; `"default": { "maxLoadBalancerServices": 0 }` refuses LoadBalancer Services wherever no rule applies (docs/tenant-safety.md#tenant-policy)',
  ];
}
