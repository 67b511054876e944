import { isJsonObject, type Json } from './patches';
import { KubeApiError } from './api-error';
import type { ResourceName, StoredObject } from './store';

/**
 * Field selectors (`?fieldSelector=`), as the API server serves them for these kinds: only the
 * fields each kind registers, compared as strings (`=`, `==`, `!=`), a missing field as "". What
 * `kubectl wait` (metadata.name), `kubectl describe` (involvedObject.*) and
 * `kubectl get events --field-selector type=Warning` send.
 */
const fieldsOf: Record<ResourceName, readonly string[]> = {
  services: ['metadata.name', 'metadata.namespace', 'spec.clusterIP', 'spec.type'],
  nodes: ['metadata.name', 'spec.unschedulable'],
  events: [
    'metadata.name',
    'metadata.namespace',
    'involvedObject.kind',
    'involvedObject.namespace',
    'involvedObject.name',
    'involvedObject.uid',
    'involvedObject.apiVersion',
    'involvedObject.resourceVersion',
    'involvedObject.fieldPath',
    'reason',
    'reportingComponent',
    'source',
    'type',
  ],
  namespaces: ['metadata.name', 'status.phase'],
  endpointslices: ['metadata.name', 'metadata.namespace', 'addressType'],
};

/** Where a selectable field's value is read from, where that is not the field's own path. */
const readFrom: Readonly<Record<string, string>> = { source: 'source.component' };

export interface FieldRequirement {
  readonly field: string;
  readonly op: '=' | '!=';
  readonly value: string;
}

export function parseFieldSelector(
  resource: ResourceName,
  selector: string | null | undefined,
): FieldRequirement[] {
  if (selector === null || selector === undefined || selector.trim() === '') return [];
  return selector.split(',').map((part) => {
    const match = /^\s*([^!=\s]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(part);
    if (match === null) {
      throw new KubeApiError(400, 'BadRequest', `invalid field selector: ${part.trim()}`);
    }
    const [, field = '', op, value = ''] = match;
    if (!fieldsOf[resource].includes(field)) {
      throw new KubeApiError(400, 'BadRequest', `field label not supported: ${field}`);
    }
    return { field, op: op === '!=' ? '!=' : '=', value };
  });
}

export function matchesFields(
  resource: ResourceName,
  object: StoredObject,
  requirements: readonly FieldRequirement[],
): boolean {
  return requirements.every((req) => {
    const actual = fieldValue(resource, object, req.field);
    return req.op === '=' ? actual === req.value : actual !== req.value;
  });
}

function fieldValue(resource: ResourceName, object: StoredObject, field: string): string {
  let value: Json | undefined = object;
  for (const step of (readFrom[field] ?? field).split('.')) {
    value = isJsonObject(value) ? value[step] : undefined;
  }
  // A node is schedulable unless it says otherwise.
  if (resource === 'nodes' && field === 'spec.unschedulable') return String(value === true);
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? String(value)
    : '';
}
