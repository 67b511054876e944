import { applyPatch, type Operation } from 'rfc6902';

/** A JSON value as it travels over the Kubernetes API. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export class PatchError extends Error {
  override readonly name = 'PatchError';
}

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** RFC 7386: objects merge recursively, `null` deletes, everything else (arrays too) replaces. */
export function applyMergePatch(target: Json, patch: Json): Json {
  if (!isJsonObject(patch)) return structuredClone(patch);
  const result: JsonObject = isJsonObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = applyMergePatch(result[key] ?? null, value);
  }
  return result;
}

export function applyJsonPatch(target: JsonObject, operations: Json): JsonObject {
  if (!Array.isArray(operations))
    throw new PatchError('a JSON patch must be an array of operations');
  // Applied to a copy and all-or-nothing, as the API server applies a JSON patch.
  const copy = structuredClone(target);
  const failure = applyPatch(copy, operations as unknown as Operation[]).find(
    (result) => result !== null,
  );
  if (failure) throw new PatchError(`JSON patch failed: ${failure.name}: ${failure.message}`);
  return copy;
}

/**
 * How a list field merges under strategic-merge-patch, for the core/v1 fields that Services,
 * Nodes and Events carry (the `patchStrategy`/`patchMergeKey` tags of the Kubernetes types).
 * Lists not named here are atomic: the patch replaces them.
 */
const listMergeKeys: Record<string, { readonly key: string } | 'primitive'> = {
  'metadata.finalizers': 'primitive',
  'metadata.ownerReferences': { key: 'uid' },
  'spec.ports': { key: 'port' },
  'status.conditions': { key: 'type' },
  'status.addresses': { key: 'type' },
  'status.loadBalancer.ingress.ports': { key: 'port' },
};

/**
 * Strategic merge patch for the fields services use: maps merge, `null` deletes, lists with a merge
 * key merge element-wise, primitive merge lists union, and the directives `$patch` (replace/delete),
 * `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>` and `$retainKeys` are honoured.
 */
export function applyStrategicMergePatch(target: Json, patch: Json, path = ''): Json {
  if (!isJsonObject(patch)) return structuredClone(patch);
  const directive = patch.$patch;
  if (directive === 'replace') {
    const { $patch: _ignored, ...rest } = patch;
    return structuredClone(rest);
  }
  if (directive === 'delete') return null;
  const result: JsonObject = isJsonObject(target) ? { ...target } : {};
  const retainKeys = patch.$retainKeys;
  if (Array.isArray(retainKeys)) {
    for (const key of Object.keys(result)) {
      if (!retainKeys.includes(key)) delete result[key];
    }
  }
  for (const [key, value] of Object.entries(patch)) {
    if (key === '$patch' || key === '$retainKeys' || key.startsWith('$setElementOrder/')) continue;
    if (key.startsWith('$deleteFromPrimitiveList/')) {
      const field = key.slice('$deleteFromPrimitiveList/'.length);
      const current = result[field];
      if (Array.isArray(current) && Array.isArray(value)) {
        result[field] = current.filter((item) => !value.includes(item));
      }
      continue;
    }
    const fieldPath = path ? `${path}.${key}` : key;
    if (value === null) {
      delete result[key];
    } else if (Array.isArray(value)) {
      result[key] = mergeList(result[key], value, listMergeKeys[fieldPath], fieldPath);
    } else {
      result[key] = applyStrategicMergePatch(result[key] ?? null, value, fieldPath);
    }
  }
  return result;
}

function mergeList(
  current: Json | undefined,
  patch: Json[],
  strategy: { readonly key: string } | 'primitive' | undefined,
  path: string,
): Json[] {
  const base = Array.isArray(current) ? current : [];
  if (strategy === undefined) return structuredClone(patch);
  if (strategy === 'primitive') {
    const merged = [...base];
    for (const item of patch) if (!merged.includes(item)) merged.push(item);
    return merged;
  }
  const replace = patch.find((item) => isJsonObject(item) && item.$patch === 'replace');
  if (replace !== undefined) {
    return patch.filter((item) => item !== replace).map((item) => structuredClone(item));
  }
  const mergeKey = strategy.key;
  const merged = [...base];
  for (const item of patch) {
    if (!isJsonObject(item) || !(mergeKey in item)) {
      throw new PatchError(
        `list ${path} elements must be objects carrying the merge key ${mergeKey}`,
      );
    }
    const index = merged.findIndex((old) => isJsonObject(old) && old[mergeKey] === item[mergeKey]);
    if (item.$patch === 'delete') {
      if (index >= 0) merged.splice(index, 1);
    } else if (index >= 0) {
      merged[index] = applyStrategicMergePatch(merged[index] ?? null, item, path);
    } else {
      merged.push(applyStrategicMergePatch(null, item, path));
    }
  }
  return merged;
}
