import type { INamespace, Type } from 'protobufjs';
import { isJsonObject, type Json, type JsonObject } from './patches';
import { KubeApiError } from './api-error';
import { resources, type ResourceName } from './store';

/**
 * Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), which
 * kubectl sends for the objects it builds itself (`kubectl create service loadbalancer`, `create
 * namespace`) and never falls back from. A documented subset (docs: README, local mode): the
 * Service, Node and Namespace fields this API server stores, decoded with protobufjs, an optional
 * package loaded on the first such body. Answers stay JSON, which kubectl also accepts.
 *
 * The encoding: the bytes `k8s\0`, then a runtime.Unknown message whose `raw` holds the object
 * (its apiVersion and kind are in the envelope's typeMeta). Field numbers are those of the
 * Kubernetes API's generated.proto files (k8s.io/api core/v1 and k8s.io/apimachinery, Apache 2.0),
 * for the fields below only; a field not listed is skipped, as a protobuf decoder does.
 */

const magic = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

type Fields = Record<
  string,
  {
    type: string;
    id: number;
    rule?: 'repeated';
    keyType?: string;
    options?: { features: { field_presence: 'EXPLICIT' } };
  }
>;

const s = (id: number) => ({ type: 'string', id });
/**
 * A field the Go types hold as a pointer: sent only when set, so `false`, `0` and `""` are values
 * to keep. Every other scalar is a plain Go value, always sent, its zero meaning unset.
 */
const pointer = <F extends { type: string; id: number }>(field: F) => ({
  ...field,
  options: { features: { field_presence: 'EXPLICIT' as const } },
});
const strings = (id: number) => ({ type: 'string', id, rule: 'repeated' as const });
const of = (type: string, id: number) => ({ type, id });
const list = (type: string, id: number) => ({ type, id, rule: 'repeated' as const });
const map = (type: string, id: number) => ({ keyType: 'string', type, id });

const messages: Record<string, Fields> = {
  Unknown: {
    typeMeta: of('TypeMeta', 1),
    raw: of('bytes', 2),
    contentEncoding: s(3),
    contentType: s(4),
  },
  TypeMeta: { apiVersion: s(1), kind: s(2) },
  Time: { seconds: of('int64', 1), nanos: of('int32', 2) },
  IntOrString: { type: of('int64', 1), intVal: of('int32', 2), strVal: s(3) },
  Quantity: { string: s(1) },
  FieldsV1: { Raw: of('bytes', 1) },
  ObjectMeta: {
    name: s(1),
    generateName: s(2),
    namespace: s(3),
    selfLink: s(4),
    uid: s(5),
    resourceVersion: s(6),
    generation: of('int64', 7),
    creationTimestamp: of('Time', 8),
    deletionTimestamp: of('Time', 9),
    deletionGracePeriodSeconds: pointer(of('int64', 10)),
    labels: map('string', 11),
    annotations: map('string', 12),
    ownerReferences: list('OwnerReference', 13),
    finalizers: strings(14),
    managedFields: list('ManagedFieldsEntry', 17),
  },
  OwnerReference: {
    apiVersion: s(5),
    kind: s(1),
    name: s(3),
    uid: s(4),
    controller: pointer(of('bool', 6)),
    blockOwnerDeletion: pointer(of('bool', 7)),
  },
  ManagedFieldsEntry: {
    manager: s(1),
    operation: s(2),
    apiVersion: s(3),
    time: of('Time', 4),
    fieldsType: s(6),
    fieldsV1: of('FieldsV1', 7),
    subresource: s(8),
  },
  Condition: {
    type: s(1),
    status: s(2),
    observedGeneration: of('int64', 3),
    lastTransitionTime: of('Time', 4),
    reason: s(5),
    message: s(6),
  },
  Service: {
    metadata: of('ObjectMeta', 1),
    spec: of('ServiceSpec', 2),
    status: of('ServiceStatus', 3),
  },
  ServiceSpec: {
    ports: list('ServicePort', 1),
    selector: map('string', 2),
    clusterIP: s(3),
    clusterIPs: strings(18),
    type: s(4),
    externalIPs: strings(5),
    sessionAffinity: s(7),
    loadBalancerIP: s(8),
    loadBalancerSourceRanges: strings(9),
    externalName: s(10),
    externalTrafficPolicy: s(11),
    healthCheckNodePort: of('int32', 12),
    publishNotReadyAddresses: of('bool', 13),
    sessionAffinityConfig: of('SessionAffinityConfig', 14),
    ipFamilies: strings(19),
    ipFamilyPolicy: pointer(s(17)),
    allocateLoadBalancerNodePorts: pointer(of('bool', 20)),
    loadBalancerClass: pointer(s(21)),
    internalTrafficPolicy: pointer(s(22)),
    trafficDistribution: pointer(s(23)),
  },
  ServicePort: {
    name: s(1),
    protocol: s(2),
    appProtocol: s(6),
    port: of('int32', 3),
    targetPort: of('IntOrString', 4),
    nodePort: of('int32', 5),
  },
  SessionAffinityConfig: { clientIP: of('ClientIPConfig', 1) },
  ClientIPConfig: { timeoutSeconds: pointer(of('int32', 1)) },
  ServiceStatus: { loadBalancer: of('LoadBalancerStatus', 1), conditions: list('Condition', 2) },
  LoadBalancerStatus: { ingress: list('LoadBalancerIngress', 1) },
  LoadBalancerIngress: {
    ip: s(1),
    hostname: s(2),
    ipMode: pointer(s(3)),
    ports: list('PortStatus', 4),
  },
  PortStatus: { port: of('int32', 1), protocol: s(2), error: pointer(s(3)) },
  Node: { metadata: of('ObjectMeta', 1), spec: of('NodeSpec', 2), status: of('NodeStatus', 3) },
  NodeSpec: {
    podCIDR: s(1),
    podCIDRs: strings(7),
    providerID: s(3),
    unschedulable: of('bool', 4),
    taints: list('Taint', 5),
    externalID: s(2),
  },
  Taint: { key: s(1), value: s(2), effect: s(3), timeAdded: of('Time', 4) },
  NodeStatus: {
    capacity: map('Quantity', 1),
    allocatable: map('Quantity', 2),
    phase: s(3),
    conditions: list('NodeCondition', 4),
    addresses: list('NodeAddress', 5),
    nodeInfo: of('NodeSystemInfo', 7),
  },
  NodeCondition: {
    type: s(1),
    status: s(2),
    lastHeartbeatTime: of('Time', 3),
    lastTransitionTime: of('Time', 4),
    reason: s(5),
    message: s(6),
  },
  NodeAddress: { type: s(1), address: s(2) },
  NodeSystemInfo: {
    machineID: s(1),
    systemUUID: s(2),
    bootID: s(3),
    kernelVersion: s(4),
    osImage: s(5),
    containerRuntimeVersion: s(6),
    kubeletVersion: s(7),
    kubeProxyVersion: s(8),
    operatingSystem: s(9),
    architecture: s(10),
  },
  Namespace: {
    metadata: of('ObjectMeta', 1),
    spec: of('NamespaceSpec', 2),
    status: of('NamespaceStatus', 3),
  },
  NamespaceSpec: { finalizers: strings(1) },
  NamespaceStatus: { phase: s(1), conditions: list('NamespaceCondition', 2) },
  NamespaceCondition: {
    type: s(1),
    status: s(2),
    lastTransitionTime: of('Time', 4),
    reason: s(5),
    message: s(6),
  },
};

const decodable: Partial<Record<ResourceName, string>> = {
  services: 'Service',
  nodes: 'Node',
  namespaces: 'Namespace',
};

const protobufPackage = 'protobufjs@^8.8.1';

let loaded: Promise<(name: string) => Type> | undefined;

/** protobufjs and the message types, on the first protobuf body. */
function messageTypes(): Promise<(name: string) => Type> {
  loaded ??= import('protobufjs')
    .then((protobuf) => {
      const descriptor: INamespace = {
        nested: Object.fromEntries(
          Object.entries(messages).map(([name, fields]) => [name, { fields }]),
        ),
      };
      const root = protobuf.Root.fromJSON(descriptor);
      return (name: string) => root.lookupType(name);
    })
    .catch((error: unknown) => {
      loaded = undefined;
      throw new KubeApiError(
        415,
        'UnsupportedMediaType',
        `protobuf bodies need the optional package ${protobufPackage} (npm install ${protobufPackage}): ${String(error)}`,
      );
    });
  return loaded;
}

/** The JSON object a protobuf body of `resource` carries, as a JSON body would have it. */
export async function decodeProtobufBody(resource: ResourceName, body: Buffer): Promise<Json> {
  const expected = decodable[resource];
  if (expected === undefined) {
    throw new KubeApiError(
      415,
      'UnsupportedMediaType',
      `protobuf bodies are read for ${Object.keys(decodable).join(', ')} only; send ${resource} as application/json`,
    );
  }
  if (!body.subarray(0, magic.length).equals(magic)) {
    throw new KubeApiError(
      400,
      'BadRequest',
      'the protobuf body does not start with the k8s\\0 prefix',
    );
  }
  const typeOf = await messageTypes();
  let envelope: JsonObject;
  let object: JsonObject;
  try {
    const unknown = typeOf('Unknown');
    const decoded = unknown.decode(body.subarray(magic.length));
    envelope = toJson(decoded, unknown);
    const kind = isJsonObject(envelope.typeMeta) ? envelope.typeMeta.kind : undefined;
    if (kind !== resources[resource].kind) {
      throw new KubeApiError(
        400,
        'BadRequest',
        `the protobuf body holds a ${typeof kind === 'string' ? kind : 'kind not given'}, not a ${resources[resource].kind}`,
      );
    }
    const type = typeOf(expected);
    const raw = (decoded as unknown as { raw?: Uint8Array }).raw ?? new Uint8Array();
    object = toJson(type.decode(raw), type);
  } catch (error) {
    if (error instanceof KubeApiError) throw error;
    throw new KubeApiError(
      400,
      'BadRequest',
      `the protobuf body could not be decoded: ${String(error)}`,
    );
  }
  return { apiVersion: 'v1', kind: resources[resource].kind, ...object };
}

/** A decoded message as the API's JSON: times as RFC 3339, int-or-string and quantities as values. */
function toJson(message: Record<string, unknown>, type: Type): JsonObject {
  const result: JsonObject = {};
  for (const field of type.fieldsArray) {
    // A plain field decoded at its zero value is not set (and not own); a pointer field is set
    // whenever it was on the wire, zero or not.
    if (!Object.prototype.hasOwnProperty.call(message, field.name)) continue;
    const value = message[field.name];
    if (value === undefined || value === null) continue;
    if (field.repeated && Array.isArray(value) && value.length === 0) continue;
    const resolved = field.resolvedType as Type | null;
    const convert = (item: unknown): Json =>
      resolved !== null && 'fieldsArray' in resolved
        ? (special(resolved.name, item as Record<string, unknown>) ??
          toJson(item as Record<string, unknown>, resolved))
        : scalar(item);
    if (field.map) {
      const entries = Object.entries(value as Record<string, unknown>);
      if (entries.length === 0) continue;
      result[field.name] = Object.fromEntries(entries.map(([key, item]) => [key, convert(item)]));
    } else if (Array.isArray(value)) {
      result[field.name] = value.map(convert);
    } else {
      result[field.name] = convert(value);
    }
  }
  return result;
}

function special(typeName: string, message: Record<string, unknown>): Json | undefined {
  switch (typeName) {
    case 'Time': {
      const seconds = Number(scalar(message.seconds));
      return new Date(seconds * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
    }
    case 'IntOrString':
      return Number(scalar(message.type)) === 1
        ? text(message.strVal)
        : Number(scalar(message.intVal));
    case 'Quantity':
      return text(message.string);
    case 'FieldsV1': {
      const raw = message.Raw;
      return raw instanceof Uint8Array
        ? (JSON.parse(Buffer.from(raw).toString('utf8')) as Json)
        : {};
    }
    default:
      return undefined;
  }
}

function scalar(value: unknown): Json {
  if (typeof value === 'string' || typeof value === 'boolean' || typeof value === 'number')
    return value;
  // int64 fields (generation, deletionGracePeriodSeconds) decode as Long objects.
  if (typeof value === 'object' && value !== null && 'toNumber' in value) {
    return (value as { toNumber(): number }).toNumber();
  }
  return null;
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}
