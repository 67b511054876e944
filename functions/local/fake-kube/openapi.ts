import { createHash } from 'node:crypto';
import * as models from '@kubernetes/client-node';
import { isJsonObject, type Json, type JsonObject } from './patches';
import { resources, type ResourceName } from './store';

/**
 * The OpenAPI documents of the kinds served (issue 35): v3 at /openapi/v3 (what kubectl reads for
 * `explain` and to learn that the server validates fields itself, so `apply -f` needs no
 * `--validate=false`) and v2 as JSON at /openapi/v2. The schemas are built from the attribute maps
 * of @kubernetes/client-node's models, which that library generates from Kubernetes' own OpenAPI,
 * so the fields and types are the API's. The same schemas let the server check a body's fields
 * (`fieldValidation`), see `unknownFields`.
 */

interface Attribute {
  readonly name: string;
  readonly baseName: string;
  readonly type: string;
  readonly format: string;
}

type ModelClass = { getAttributeTypeMap(): Attribute[] };

const rootModels: Record<ResourceName, string> = {
  services: 'V1Service',
  nodes: 'V1Node',
  events: 'CoreV1Event',
  namespaces: 'V1Namespace',
  endpointslices: 'V1EndpointSlice',
};

/** client-node's names for the types apimachinery and discovery/v1 define (the rest are core's). */
const metaTypes = new Set(['ObjectMeta', 'ManagedFieldsEntry', 'OwnerReference', 'Condition']);
const discoveryTypes = new Set([
  'EndpointSlice',
  'Endpoint',
  'EndpointConditions',
  'EndpointHints',
  'EndpointPort',
  'ForZone',
  'ForNode',
]);

function modelClass(name: string): ModelClass | undefined {
  const found: unknown = (models as Record<string, unknown>)[name];
  return typeof found === 'function' && 'getAttributeTypeMap' in found
    ? (found as unknown as ModelClass)
    : undefined;
}

function schemaName(model: string): string {
  const bare = model.replace(/^(CoreV1|DiscoveryV1|V1)/, '');
  if (metaTypes.has(bare)) return `io.k8s.apimachinery.pkg.apis.meta.v1.${bare}`;
  if (discoveryTypes.has(bare)) return `io.k8s.api.discovery.v1.${bare}`;
  return `io.k8s.api.core.v1.${bare}`;
}

/** Every schema reachable from the served kinds, by name, with `#/…` refs under `refPrefix`. */
function buildSchemas(refPrefix: string): Record<string, JsonObject> {
  const schemas: Record<string, JsonObject> = {};
  const visit = (model: string): void => {
    const name = schemaName(model);
    if (schemas[name] !== undefined) return;
    const cls = modelClass(model);
    if (cls === undefined) return;
    const properties: JsonObject = {};
    schemas[name] = { type: 'object', properties };
    for (const attribute of cls.getAttributeTypeMap()) {
      properties[attribute.baseName] = typeSchema(attribute.type, attribute.format);
    }
  };
  const typeSchema = (type: string, format: string): JsonObject => {
    const array = /^Array<(.+)>$/.exec(type);
    if (array) return { type: 'array', items: typeSchema(array[1] ?? 'any', '') };
    const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
    if (map) return { type: 'object', additionalProperties: typeSchema(map[1] ?? 'any', '') };
    switch (type) {
      case 'string':
        return { type: 'string', ...(format ? { format } : {}) };
      case 'number':
        return format.startsWith('int')
          ? { type: 'integer', format }
          : { type: 'number', ...(format ? { format } : {}) };
      case 'boolean':
        return { type: 'boolean' };
      case 'Date':
      case 'V1MicroTime':
        return { type: 'string', format: 'date-time' };
      case 'IntOrString':
        return { 'x-kubernetes-int-or-string': true };
      case 'any':
      case 'object':
        return { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
      default:
        if (modelClass(type) === undefined) {
          return { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
        }
        visit(type);
        return { $ref: `${refPrefix}${schemaName(type)}` };
    }
  };
  for (const [resource, model] of Object.entries(rootModels) as [ResourceName, string][]) {
    visit(model);
    const schema = schemas[schemaName(model)];
    if (schema !== undefined) {
      schema['x-kubernetes-group-version-kind'] = [
        { group: resources[resource].group ?? '', kind: resources[resource].kind, version: 'v1' },
      ];
    }
  }
  return schemas;
}

const v3Schemas = buildSchemas('#/components/schemas/');

/** The query parameters each verb takes, as the API server documents them. */
const queryParameters: Record<string, readonly string[]> = {
  get: ['pretty'],
  list: ['labelSelector', 'fieldSelector', 'limit', 'continue', 'resourceVersion', 'watch'],
  post: ['dryRun', 'fieldManager', 'fieldValidation'],
  put: ['dryRun', 'fieldManager', 'fieldValidation'],
  patch: ['dryRun', 'fieldManager', 'fieldValidation', 'force'],
  delete: ['dryRun', 'gracePeriodSeconds', 'propagationPolicy'],
};

function operation(
  verb: string,
  action: string,
  resource: ResourceName,
  ref: string,
  body: 'v3' | 'v2',
): JsonObject {
  const { kind, group = '' } = resources[resource];
  const parameters = (queryParameters[verb] ?? []).map((name) => ({
    name,
    in: 'query',
    ...(body === 'v3' ? { schema: { type: 'string' } } : { type: 'string' }),
  }));
  const content = (schemaRef: string): JsonObject =>
    body === 'v3'
      ? { content: { 'application/json': { schema: { $ref: schemaRef } } } }
      : { schema: { $ref: schemaRef } };
  const takesBody = verb === 'post' || verb === 'put' || verb === 'patch';
  return {
    operationId: `${action}${group === '' ? 'Core' : 'Discovery'}V1${kind}`,
    parameters:
      body === 'v2' && takesBody
        ? [...parameters, { name: 'body', in: 'body', required: true, schema: { $ref: ref } }]
        : parameters,
    ...(body === 'v3' && takesBody ? { requestBody: content(ref) } : {}),
    responses: { '200': { description: 'OK', ...content(ref) } },
    'x-kubernetes-action': action,
    'x-kubernetes-group-version-kind': { group, kind, version: 'v1' },
  };
}

/** The paths of one group's kinds (core: no group), or of all of them. */
function buildPaths(body: 'v3' | 'v2', refPrefix: string, group?: string | null): JsonObject {
  const paths: JsonObject = {};
  for (const [resource, model] of Object.entries(rootModels) as [ResourceName, string][]) {
    const { namespaced, hasStatusSubresource } = resources[resource];
    if (group !== null && group !== resources[resource].group) continue;
    const ref = `${refPrefix}${schemaName(model)}`;
    const prefix = groupPrefix(resources[resource].group);
    const base = namespaced
      ? `${prefix}/namespaces/{namespace}/${resource}`
      : `${prefix}/${resource}`;
    const op = (verb: string, action: string) => operation(verb, action, resource, ref, body);
    paths[base] = { get: op('list', 'list'), post: op('post', 'post') };
    const item = {
      get: op('get', 'get'),
      put: op('put', 'put'),
      patch: op('patch', 'patch'),
      delete: op('delete', 'delete'),
    };
    paths[`${base}/{name}`] = item;
    if (hasStatusSubresource) {
      paths[`${base}/{name}/status`] = {
        get: op('get', 'get'),
        put: op('put', 'put'),
        patch: op('patch', 'patch'),
      };
    }
  }
  return paths;
}

function groupPrefix(group: string | undefined): string {
  return group === undefined ? '/api/v1' : `/apis/${group}/v1`;
}

/** One OpenAPI v3 document per group version, as the API server serves them. */
const v3Documents = new Map<string, { document: JsonObject; hash: string }>(
  [...new Set(Object.values(resources).map((kind) => kind.group))].map((group) => {
    const document: JsonObject = {
      openapi: '3.0.0',
      info: { title: 'Kubernetes (simulated cluster)', version: 'v1.33.0' },
      paths: buildPaths('v3', '#/components/schemas/', group),
      components: { schemas: v3Schemas },
    };
    const hash = createHash('sha512').update(JSON.stringify(document)).digest('hex').slice(0, 32);
    return [groupPrefix(group).slice(1), { document, hash }];
  }),
);

const v2Document: JsonObject = {
  swagger: '2.0',
  info: { title: 'Kubernetes (simulated cluster)', version: 'v1.33.0' },
  paths: buildPaths('v2', '#/definitions/', null),
  definitions: buildSchemas('#/definitions/'),
};

/** What GET `path` answers with, if it is one of the OpenAPI documents. */
export function openApiDocument(path: string): Json | undefined {
  const trimmed = path.replace(/\/$/, '');
  if (trimmed === '/openapi/v2') return v2Document;
  if (trimmed === '/openapi/v3') {
    return {
      paths: Object.fromEntries(
        [...v3Documents].map(([groupVersion, { hash }]) => [
          groupVersion,
          { serverRelativeURL: `/openapi/v3/${groupVersion}?hash=${hash}` },
        ]),
      ),
    };
  }
  return v3Documents.get(trimmed.replace(/^\/openapi\/v3\//, ''))?.document;
}

/**
 * The fields of `body` that the kind's schema does not know, as `.spec.foo` paths (what the API
 * server names in "strict decoding error: unknown field"). A map's keys and free-form fields are
 * anyone's; strategic-merge directives (`$patch`, `$setElementOrder/…`) are not fields.
 */
export function unknownFields(resource: ResourceName, body: Json): string[] {
  const found: string[] = [];
  const check = (value: Json, schema: JsonObject | undefined, path: string): void => {
    const resolved = resolve(schema);
    if (resolved === undefined || resolved['x-kubernetes-preserve-unknown-fields'] === true) return;
    if (Array.isArray(value)) {
      const items = isJsonObject(resolved.items) ? resolved.items : undefined;
      value.forEach((item, i) => check(item, items, `${path}[${i}]`));
      return;
    }
    if (!isJsonObject(value)) return;
    if (isJsonObject(resolved.additionalProperties)) {
      for (const [key, item] of Object.entries(value)) {
        check(item, resolved.additionalProperties, `${path}.${key}`);
      }
      return;
    }
    const properties = isJsonObject(resolved.properties) ? resolved.properties : undefined;
    if (properties === undefined) return;
    for (const [key, item] of Object.entries(value)) {
      if (key.startsWith('$')) continue;
      const field = properties[key];
      if (field === undefined) found.push(`${path}.${key}`);
      else if (item !== null && isJsonObject(field)) check(item, field, `${path}.${key}`);
    }
  };
  check(body, { $ref: `#/components/schemas/${schemaName(rootModels[resource])}` }, '');
  return found;
}

function resolve(schema: JsonObject | undefined): JsonObject | undefined {
  const ref = schema?.$ref;
  if (typeof ref !== 'string') return schema;
  return v3Schemas[ref.replace('#/components/schemas/', '')];
}

/** Removes `paths` (from unknownFields) from `body`: what a decode into the API's types keeps. */
export function withoutFields(body: Json, paths: readonly string[]): Json {
  const copy = structuredClone(body);
  for (const path of paths) {
    const steps = path
      .slice(1)
      .split(/\.|\[(\d+)\]/)
      .filter((step) => step !== undefined && step !== '');
    let parent: Json = copy;
    for (const step of steps.slice(0, -1)) {
      parent = Array.isArray(parent)
        ? (parent[Number(step)] ?? null)
        : isJsonObject(parent)
          ? (parent[step] ?? null)
          : null;
    }
    const last = steps.at(-1);
    if (isJsonObject(parent) && last !== undefined) delete parent[last];
  }
  return copy;
}
