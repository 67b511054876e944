import { quoted } from '../../core/echo';

/**
 * What a user (annotation) or an operator (defaultTags) may put in the tags of our resources.
 * Dependency-free, so the configuration schema can use it without pulling in the NLB model.
 */

/** AWS tag limits (ELBv2 and EC2 alike). */
export const awsTagLimits = {
  keyChars: 128,
  valueChars: 256,
  tagsPerResource: 50,
} as const;

/**
 * The tags the controller itself puts on every resource (the `kubernetes.io/cluster/<name>` tag
 * and four ownership tags; naming.ts), which count against the 50.
 */
export const ownTagCount = 5;

/** How many tags users and the deployment may add between them. */
export const maxExtraTags = awsTagLimits.tagsPerResource - ownTagCount;

/**
 * Key prefixes that mark ownership, ours or another controller's: a tag under one of them could
 * make a resource look like someone else's (or ours) to that controller, its sweeps and its IAM
 * conditions. Compared in lower case, because IAM matches tag keys in condition keys without
 * regard to case, so `Serverless-Service-Controller.io/cluster` would satisfy a policy written for
 * ours. `aws:` is AWS's own and cannot be set at all.
 */
const reservedKeyPrefixes = [
  'aws:',
  'serverless-service-controller.io/',
  // Upstream Kubernetes and the legacy AWS cloud provider (kubernetes.io/cluster/<name>, …).
  'kubernetes.io/',
  // The AWS Load Balancer Controller.
  'elbv2.k8s.aws/',
  'service.k8s.aws/',
  'ingress.k8s.aws/',
];

/** Whole keys with the same meaning: the legacy cloud provider's cluster ownership tag. */
const reservedKeys = ['kubernetescluster'];

/**
 * Names of Object.prototype members: as keys of a plain object they either throw (a lookup that
 * finds a function), vanish (`__proto__`) or pass a check by accident, so they are refused
 * wherever a user picks keys.
 */
const prototypeKeys = new Set(Object.getOwnPropertyNames(Object.prototype));

export function isPrototypeKey(key: string): boolean {
  return prototypeKeys.has(key);
}

/** ELBv2's tag pattern: letters, separators, digits and `_ . : / = + - @` (EC2 allows more). */
const tagText = /^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$/u;

/** Whether a tag key is reserved for AWS, this controller or another one. */
export function isReservedTagKey(key: string): boolean {
  const lower = key.toLowerCase();
  return (
    reservedKeys.includes(lower) || reservedKeyPrefixes.some((prefix) => lower.startsWith(prefix))
  );
}

/**
 * Everything wrong with tags a user or the deployment asks for, each naming the key (cut short):
 * reserved and prototype keys, AWS's length and character rules, and more tags than fit beside
 * ours. `maxTags` is what this source may add.
 */
export function tagProblems(tags: ReadonlyMap<string, string>, maxTags = maxExtraTags): string[] {
  const problems: string[] = [];
  if (tags.size > maxTags) {
    problems.push(
      `${tags.size} tags, over the ${maxTags} that fit beside the controller's ${ownTagCount} (AWS allows ${awsTagLimits.tagsPerResource} per resource)`,
    );
  }
  for (const [key, value] of tags) {
    const name = quoted(key);
    if (isReservedTagKey(key)) {
      problems.push(`tag key ${name} is reserved (AWS, this controller or another controller)`);
    } else if (isPrototypeKey(key)) {
      problems.push(`tag key ${name} is not allowed (it names a built-in object property)`);
    } else if (key.length > awsTagLimits.keyChars || value.length > awsTagLimits.valueChars) {
      problems.push(
        `tag ${name} is too long (key ≤ ${awsTagLimits.keyChars}, value ≤ ${awsTagLimits.valueChars} characters)`,
      );
    } else if (!tagText.test(key)) {
      problems.push(
        `tag key ${name} has characters AWS does not allow (letters, digits, spaces and _ . : / = + - @)`,
      );
    } else if (!tagText.test(value)) {
      problems.push(
        `tag ${name} has a value with characters AWS does not allow (letters, digits, spaces and _ . : / = + - @)`,
      );
    }
  }
  return problems;
}
