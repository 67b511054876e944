/**
 * Which namespaces a configuration rule is about: names (with `*` wildcards) and Kubernetes label
 * selectors over the Namespace's labels. Provider-neutral and pure.
 */

export type Labels = Readonly<Record<string, string>>;

export interface LabelSelectorRequirement {
  readonly key: string;
  readonly operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
  readonly values?: readonly string[] | undefined;
}

/** A Kubernetes label selector: every requirement must hold (matchLabels are `In` with one value). */
export interface LabelSelector {
  readonly matchLabels?: Labels | undefined;
  readonly matchExpressions?: readonly LabelSelectorRequirement[] | undefined;
}

export function labelSelectorMatches(selector: LabelSelector, labels: Labels): boolean {
  // Own properties only: a label named like an Object.prototype member must not appear present.
  const has = (key: string) => Object.prototype.hasOwnProperty.call(labels, key);
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (!has(key) || labels[key] !== value) return false;
  }
  for (const requirement of selector.matchExpressions ?? []) {
    const present = has(requirement.key);
    const value = present ? labels[requirement.key] : undefined;
    const values = requirement.values ?? [];
    switch (requirement.operator) {
      case 'In':
        if (!present || !values.includes(value ?? '')) return false;
        break;
      case 'NotIn':
        // As in Kubernetes: a namespace without the label is not in the excluded set.
        if (present && values.includes(value ?? '')) return false;
        break;
      case 'Exists':
        if (!present) return false;
        break;
      case 'DoesNotExist':
        if (present) return false;
        break;
    }
  }
  return true;
}

/**
 * Whether `text` matches `pattern`, where `*` stands for any run of characters (none included)
 * and everything else is literal. Linear in practice and never exponential, whatever the pattern:
 * a tenant chooses the text, so a backtracking regular expression is not an option here.
 */
export function wildcardMatches(pattern: string, text: string): boolean {
  let p = 0;
  let t = 0;
  let star = -1;
  let resume = 0;
  while (t < text.length) {
    if (p < pattern.length && pattern[p] !== '*' && pattern[p] === text[t]) {
      p++;
      t++;
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      resume = t;
    } else if (star >= 0) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === '*') p++;
  return p === pattern.length;
}
