/** A JSON value, the only thing the core hashes or hands to storage. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | readonly JsonValue[]
  | { readonly [key: string]: JsonValue | undefined };

/**
 * A stable 106-bit hash of a JSON value (object keys sorted, `undefined` members dropped), for
 * change detection: checkpoints and host sets. Not for security. Written here rather than taken
 * from node:crypto so the core stays free of Node built-ins.
 */
export function stableHash(value: JsonValue): string {
  const text = canonicalJson(value);
  return (
    cyrb53(text, 0x9e3779b9).toString(16).padStart(14, '0') +
    cyrb53(text, 0x85ebca6b).toString(16).padStart(14, '0')
  );
}

export function canonicalJson(value: JsonValue | undefined): string {
  if (value === undefined) return 'null';
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) {
    return `[${(value as readonly JsonValue[]).map((item) => canonicalJson(item)).join(',')}]`;
  }
  const record = value as { readonly [key: string]: JsonValue | undefined };
  const members = Object.keys(record)
    .filter((key) => record[key] !== undefined)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`);
  return `{${members.join(',')}}`;
}

// cyrb53 (public domain, bryc): a fast 53-bit string hash with good dispersion.
function cyrb53(text: string, seed: number): number {
  let h1 = 0xdeadbeef ^ seed;
  let h2 = 0x41c6ce57 ^ seed;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}
