import { isDeepStrictEqual } from 'node:util';
import { isJsonObject, type Json, type JsonObject } from './patches';

/** An object as the store keeps it (store.ts's StoredObject, without importing the store). */
interface StoredObject extends JsonObject {
  metadata: JsonObject;
}

/** A field another manager set to another value: the store answers 409 with this message. */
export class ApplyConflictError extends Error {
  override readonly name = 'ApplyConflictError';
}

/**
 * Field ownership (`metadata.managedFields`) and server-side apply, to the extent kubectl's common
 * use needs (issue 35): `kubectl apply --server-side` creates or updates an object from the
 * manager's whole intent, removes what that manager applied before and no longer does, refuses a
 * field another manager set to another value (409, naming both) unless `--force-conflicts`, and
 * other writes (create, replace, patch) take the fields they change. Ownership lives in the
 * object's own managedFields, in the FieldsV1 form the API server uses, so it survives every copy.
 *
 * A field is a path of `f:<name>` steps, `k:<keys>` for an item of a list keyed by some of its
 * fields (a Service's ports by port and protocol), and `v:<value>` for an item of a set
 * (finalizers). Every other list, and every scalar, is owned whole.
 */

type Path = readonly string[];

/** Lists whose items are owned one by one, by the fields that name them. */
const keyedLists: Readonly<Record<string, readonly string[]>> = {
  'spec.ports': ['port', 'protocol'],
  'metadata.ownerReferences': ['uid'],
  'status.conditions': ['type'],
  'status.addresses': ['type'],
};
const setLists = new Set(['metadata.finalizers']);
/** The server's, not any manager's. */
const unowned = new Set([
  'apiVersion',
  'kind',
  'metadata.name',
  'metadata.namespace',
  'metadata.uid',
  'metadata.resourceVersion',
  'metadata.creationTimestamp',
  'metadata.deletionTimestamp',
  'metadata.deletionGracePeriodSeconds',
  'metadata.generation',
  'metadata.managedFields',
  'metadata.selfLink',
]);

interface Entry {
  manager: string;
  operation: 'Apply' | 'Update';
  fields: Set<string>;
  /** When the manager last wrote: kept for managers a write leaves alone. */
  time: string;
}

const keyOf = (path: Path) => JSON.stringify(path);
const pathOf = (key: string) => JSON.parse(key) as string[];

/** `spec.ports` for `f:spec`, `f:ports`, `k:…`: where a list's rule is looked up. */
function shape(path: Path): string {
  return path
    .filter((step) => step.startsWith('f:'))
    .map((step) => step.slice(2))
    .join('.');
}

function itemKey(listShape: string, item: Json): string | undefined {
  const keys = keyedLists[listShape];
  if (keys === undefined || !isJsonObject(item)) return undefined;
  // A port's protocol is TCP when not given, as the API server defaults it.
  const values = keys.map((key) => [
    key,
    item[key] ?? (listShape === 'spec.ports' && key === 'protocol' ? 'TCP' : null),
  ]);
  return `k:${JSON.stringify(Object.fromEntries(values))}`;
}

/** Every owned field of `value` (paths of leaves, and of list items as `.`). */
export function fieldsOf(value: Json, path: Path = []): Set<string> {
  const found = new Set<string>();
  const walk = (node: Json, at: Path): void => {
    if (unowned.has(shape(at)) && at.length > 0) return;
    if (isJsonObject(node) && Object.keys(node).length > 0) {
      for (const [name, child] of Object.entries(node)) walk(child, [...at, `f:${name}`]);
      return;
    }
    if (Array.isArray(node) && node.length > 0) {
      const listShape = shape(at);
      if (setLists.has(listShape)) {
        for (const item of node) found.add(keyOf([...at, `v:${JSON.stringify(item)}`]));
        return;
      }
      if (keyedLists[listShape] !== undefined) {
        for (const item of node) {
          const itemPath = [...at, itemKey(listShape, item) ?? 'k:{}'];
          found.add(keyOf([...itemPath, '.']));
          walk(item, itemPath);
        }
        return;
      }
    }
    if (at.length > 0) found.add(keyOf(at));
  };
  walk(value, path);
  return found;
}

/** The value at `path` (undefined where there is none). */
function valueAt(root: Json, path: Path): Json | undefined {
  let node: Json | undefined = root;
  for (const step of path) {
    if (step === '.') return node;
    if (step.startsWith('f:')) {
      node = isJsonObject(node) ? node[step.slice(2)] : undefined;
    } else if (step.startsWith('k:') && Array.isArray(node)) {
      const list: Json[] = node;
      const listShape = shape(path.slice(0, path.indexOf(step)));
      node = list.find((item) => itemKey(listShape, item) === step);
    } else if (step.startsWith('v:') && Array.isArray(node)) {
      const wanted = JSON.parse(step.slice(2)) as Json;
      return node.some((item) => isDeepStrictEqual(item, wanted)) ? wanted : undefined;
    } else {
      return undefined;
    }
  }
  return node;
}

/** Writes (or with `undefined`, removes) the value at `path`, making the containers on the way. */
function setAt(root: JsonObject, path: Path, value: Json | undefined): void {
  let node: Json = root;
  for (let i = 0; i < path.length; i++) {
    const step = path[i] ?? '';
    const last = i === path.length - 1 || path[i + 1] === '.';
    if (step.startsWith('f:') && isJsonObject(node)) {
      const name = step.slice(2);
      if (last) {
        if (value === undefined) delete node[name];
        else node[name] = structuredClone(value);
        return;
      }
      const next = path[i + 1] ?? '';
      // Removing under something absent removes nothing.
      if (node[name] === undefined && value === undefined) return;
      node[name] ??= next.startsWith('k:') || next.startsWith('v:') ? [] : {};
      node = node[name] ?? null;
    } else if (step.startsWith('v:') && Array.isArray(node)) {
      const item = JSON.parse(step.slice(2)) as Json;
      const at = node.findIndex((existing) => isDeepStrictEqual(existing, item));
      if (value === undefined && at >= 0) node.splice(at, 1);
      else if (value !== undefined && at < 0) node.push(item);
      return;
    } else if (step.startsWith('k:') && Array.isArray(node)) {
      const listShape = shape(path.slice(0, i));
      let at = node.findIndex((item) => itemKey(listShape, item) === step);
      if (last) {
        if (value === undefined && at >= 0) node.splice(at, 1);
        else if (value !== undefined && at < 0) node.push(structuredClone(value));
        return;
      }
      if (at < 0) {
        if (value === undefined) return;
        node.push({ ...(JSON.parse(step.slice(2)) as JsonObject) });
        at = node.length - 1;
      }
      node = node[at] ?? null;
    } else {
      return;
    }
  }
}

function readEntries(object: StoredObject | undefined): Entry[] {
  const list = object?.metadata.managedFields;
  if (!Array.isArray(list)) return [];
  return list.flatMap((raw) => {
    if (!isJsonObject(raw) || typeof raw.manager !== 'string') return [];
    if (raw.subresource !== undefined) return [];
    const fields = new Set<string>();
    const walk = (node: Json, at: string[]): void => {
      if (!isJsonObject(node)) return;
      const children = Object.entries(node);
      if (children.length === 0) fields.add(keyOf(at));
      for (const [step, child] of children) walk(child, [...at, step]);
    };
    walk(raw.fieldsV1 ?? {}, []);
    return [
      {
        manager: raw.manager,
        operation: raw.operation === 'Apply' ? ('Apply' as const) : ('Update' as const),
        fields,
        time: typeof raw.time === 'string' ? raw.time : '',
      },
    ];
  });
}

function writeEntries(object: StoredObject, entries: readonly Entry[]): void {
  const kept = entries.filter((entry) => entry.fields.size > 0);
  if (kept.length === 0) {
    delete object.metadata.managedFields;
    return;
  }
  object.metadata.managedFields = kept.map((entry) => {
    const fieldsV1: JsonObject = {};
    for (const key of [...entry.fields].sort()) {
      let node = fieldsV1;
      for (const step of pathOf(key)) {
        const child = node[step];
        node[step] = isJsonObject(child) ? child : {};
        node = node[step];
      }
    }
    return {
      manager: entry.manager,
      operation: entry.operation,
      apiVersion: typeof object.apiVersion === 'string' ? object.apiVersion : 'v1',
      time: entry.time,
      fieldsType: 'FieldsV1',
      fieldsV1,
    };
  });
}

/**
 * A write other than apply by `manager`: it owns what it changed (others lose it), and a field
 * that is gone is nobody's. `before` is undefined for a create, where it owns what it sent.
 */
export function recordUpdate(
  before: StoredObject | undefined,
  after: StoredObject,
  manager: string,
  now: string,
  sent?: Json,
): void {
  const entries = readEntries(before);
  const present = fieldsOf(after);
  const changed =
    before === undefined
      ? [...fieldsOf(sent ?? after)].filter((key) => present.has(key))
      : [...present].filter((key) => {
          const path = pathOf(key);
          // A list item is taken by whoever adds it; changing its fields takes only those.
          if (path.at(-1) === '.') return valueAt(before, path) === undefined;
          return !isDeepStrictEqual(valueAt(before, path), valueAt(after, path));
        });
  for (const entry of entries) {
    for (const key of [...entry.fields]) if (!present.has(key)) entry.fields.delete(key);
    for (const key of changed) entry.fields.delete(key);
  }
  if (changed.length > 0) {
    let mine = entries.find((e) => e.manager === manager && e.operation === 'Update');
    if (mine === undefined) {
      mine = { manager, operation: 'Update', fields: new Set(), time: now };
      entries.push(mine);
    }
    for (const key of changed) mine.fields.add(key);
    mine.time = now;
  }
  writeEntries(after, entries);
}

/**
 * Server-side apply of `config` by `manager` onto `current` (undefined: it is created). Returns
 * the object to store; throws 409 naming each field another manager set to another value, unless
 * `force`, which takes those fields over.
 */
export function applyConfig(
  current: StoredObject | undefined,
  config: JsonObject,
  manager: string,
  force: boolean,
  now: string,
  /** The kind's apiVersion, for an object the apply creates. */
  apiVersion = 'v1',
): StoredObject {
  // Status is the status subresource's: an apply to the object itself leaves it alone.
  const intent: JsonObject = { ...config };
  delete intent.status;
  const applied = fieldsOf(intent);
  const entries = readEntries(current);
  const base: StoredObject = current
    ? structuredClone(current)
    : { apiVersion, metadata: { ...(isJsonObject(config.metadata) ? config.metadata : {}) } };
  const conflicts: string[] = [];
  for (const entry of entries) {
    if (entry.manager === manager && entry.operation === 'Apply') continue;
    for (const key of applied) {
      if (!entry.fields.has(key)) continue;
      const path = pathOf(key);
      // Both want the item to be there: only its fields can disagree.
      if (path.at(-1) === '.') continue;
      if (isDeepStrictEqual(valueAt(base, path), valueAt(intent, path))) continue;
      if (force) {
        entry.fields.delete(key);
        entry.time = now;
      } else conflicts.push(`conflict with ${JSON.stringify(entry.manager)}: ${printable(path)}`);
    }
  }
  if (conflicts.length > 0) {
    throw new ApplyConflictError(
      `Apply failed with ${conflicts.length} conflict${conflicts.length === 1 ? '' : 's'}: ${conflicts.join('\n')}`,
    );
  }
  let mine = entries.find((e) => e.manager === manager && e.operation === 'Apply');
  // What this manager applied before and no longer does goes, unless someone else holds it too.
  for (const key of mine?.fields ?? []) {
    if (applied.has(key)) continue;
    if (entries.some((e) => e !== mine && e.fields.has(key))) continue;
    const path = pathOf(key);
    const removed = path.at(-1) === '.' ? path.slice(0, -1) : path;
    setAt(base, removed, undefined);
    // A map or list left empty goes too, as the API's encoding omits empty ones.
    for (let end = removed.length - 1; end > 0; end--) {
      const container = valueAt(base, removed.slice(0, end));
      const empty =
        (Array.isArray(container) && container.length === 0) ||
        (isJsonObject(container) && Object.keys(container).length === 0);
      if (!empty) break;
      setAt(base, removed.slice(0, end), undefined);
    }
  }
  for (const key of applied) {
    const path = pathOf(key);
    const target = path.at(-1) === '.' ? path.slice(0, -1) : path;
    if (path.at(-1) === '.') {
      if (valueAt(base, target) === undefined) setAt(base, target, valueAt(intent, target) ?? {});
      continue;
    }
    setAt(base, target, valueAt(intent, target) ?? null);
  }
  if (mine === undefined) {
    mine = { manager, operation: 'Apply', fields: new Set(), time: now };
    entries.push(mine);
  }
  const sameFields =
    mine.fields.size === applied.size && [...applied].every((key) => mine.fields.has(key));
  const sameObject =
    current !== undefined && isDeepStrictEqual(withoutManaged(base), withoutManaged(current));
  mine.fields = new Set(applied);
  // The same apply again changes nothing, not even the time: the write is a no-op.
  if (!(sameFields && sameObject)) mine.time = now;
  writeEntries(base, entries);
  return base;
}

/** `.spec.ports[port=80,protocol="TCP"].targetPort`, as the API server names a conflict. */
function printable(path: Path): string {
  return path
    .filter((step) => step !== '.')
    .map((step) => {
      if (step.startsWith('f:')) return `.${step.slice(2)}`;
      if (step.startsWith('v:')) return `[${step.slice(2)}]`;
      const keys = Object.entries(JSON.parse(step.slice(2)) as JsonObject);
      return `[${keys.map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(',')}]`;
    })
    .join('');
}

function withoutManaged(object: StoredObject): StoredObject {
  const metadata = { ...object.metadata };
  delete metadata.managedFields;
  return { ...object, metadata };
}
