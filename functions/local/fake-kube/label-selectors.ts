import { KubeApiError } from './api-error';
import { isJsonObject, type JsonObject } from './patches';

type LabelRequirement =
  | { op: '=' | '!='; key: string; value: string }
  | { op: 'exists' | '!exists'; key: string }
  | { op: 'in' | 'notin'; key: string; values: string[] };

/**
 * Label selectors as the API server reads them: equality (`a=b`, `a==b`, `a!=b`), existence
 * (`a`, `!a`) and sets (`a in (x,y)`, `a notin (x,y)`), comma-separated outside parentheses.
 */
export function parseLabelSelector(selector: string | undefined): LabelRequirement[] {
  if (selector === undefined || selector.trim() === '') return [];
  return splitOutsideParentheses(selector).map((part): LabelRequirement => {
    const term = part.trim();
    const set = /^([\w./-]+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
    if (set) {
      const [, key = '', op, list = ''] = set;
      const values = list.split(',').map((value) => value.trim());
      return { op: op === 'notin' ? 'notin' : 'in', key, values };
    }
    const match = /^([^!=]+?)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (match) {
      const [, key = '', op, value = ''] = match;
      return { op: op === '!=' ? '!=' : '=', key: key.trim(), value: value.trim() };
    }
    if (term.startsWith('!')) return { op: '!exists', key: term.slice(1).trim() };
    if (/^[\w./-]+$/.test(term)) return { op: 'exists', key: term };
    throw new KubeApiError(400, 'BadRequest', `unable to parse requirement: ${term}`);
  });
}

function splitOutsideParentheses(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (const char of text) {
    if (char === '(') depth++;
    if (char === ')') depth = Math.max(0, depth - 1);
    if (char === ',' && depth === 0) {
      parts.push(current);
      current = '';
    } else {
      current += char;
    }
  }
  parts.push(current);
  return parts;
}

export function matchesLabels(
  object: { readonly metadata: JsonObject },
  requirements: LabelRequirement[],
): boolean {
  const labels = isJsonObject(object.metadata.labels) ? object.metadata.labels : {};
  return requirements.every((req) => {
    const value = labels[req.key];
    switch (req.op) {
      case '=':
        return value === req.value;
      case '!=':
        return value !== req.value;
      case 'exists':
        return value !== undefined;
      case '!exists':
        return value === undefined;
      case 'in':
        return typeof value === 'string' && req.values.includes(value);
      case 'notin':
        return typeof value !== 'string' || !req.values.includes(value);
    }
  });
}
