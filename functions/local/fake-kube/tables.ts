import { isJsonObject, type Json, type JsonObject } from './patches';
import type { ResourceName, StoredObject } from './store';

/**
 * The Table format (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`) that kubectl asks
 * for on every `get`: the server prints, kubectl only lays the cells out. Columns and cells follow
 * what a real API server prints for these kinds (TYPE, CLUSTER-IP, EXTERNAL-IP, PORT(S) for
 * Services; STATUS, ROLES, VERSION for Nodes; …); priority-1 columns are what `-o wide` adds.
 */

interface Column {
  readonly name: string;
  readonly type: 'string' | 'date' | 'integer';
  readonly format?: 'name';
  readonly description: string;
  /** 0: always shown; 1: `-o wide`. */
  readonly priority: 0 | 1;
  readonly cell: (object: StoredObject, now: number) => string | number;
}

export type IncludeObject = 'None' | 'Metadata' | 'Object';

/** The Table version the Accept header asks for, if it asks for one. */
export function requestedTableVersion(accept: string | undefined): 'v1' | 'v1beta1' | undefined {
  const versions = (accept ?? '')
    .split(',')
    .map((type) => type.replace(/\s+/g, ''))
    .filter((type) => type.includes('as=Table') && type.includes('g=meta.k8s.io'))
    .map((type) => (type.includes('v=v1beta1') ? 'v1beta1' : 'v1'));
  return versions[0];
}

export function includeObjectOf(value: string | null): IncludeObject {
  return value === 'None' || value === 'Object' ? value : 'Metadata';
}

export function toTable(
  resource: ResourceName,
  objects: readonly StoredObject[],
  options: {
    readonly version: 'v1' | 'v1beta1';
    readonly includeObject: IncludeObject;
    readonly now: number;
    readonly listMetadata?: JsonObject;
  },
): JsonObject {
  const columns = columnsOf[resource];
  return {
    kind: 'Table',
    apiVersion: `meta.k8s.io/${options.version}`,
    metadata: options.listMetadata ?? {},
    columnDefinitions: columns.map(({ name, type, format, description, priority }) => ({
      name,
      type,
      format: format ?? '',
      description,
      priority,
    })),
    rows: objects.map((object) => ({
      cells: columns.map((column) => column.cell(object, options.now)),
      ...rowObject(object, options.includeObject, options.version),
    })),
  };
}

function rowObject(object: StoredObject, include: IncludeObject, version: string): JsonObject {
  if (include === 'None') return {};
  if (include === 'Object') return { object };
  return {
    object: {
      kind: 'PartialObjectMetadata',
      apiVersion: `meta.k8s.io/${version}`,
      metadata: object.metadata,
    },
  };
}

const name: Column = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description: 'Name must be unique within a namespace.',
  priority: 0,
  cell: (object) => text(object.metadata.name),
};

const age: Column = {
  name: 'Age',
  type: 'date',
  description: 'CreationTimestamp is when this object was created.',
  priority: 0,
  cell: (object, now) => since(object.metadata.creationTimestamp, now),
};

const columnsOf: Record<ResourceName, readonly Column[]> = {
  services: [
    name,
    column('Type', 'The way the Service is exposed.', (s) => text(spec(s).type)),
    column('Cluster-IP', 'The IP address of the Service in the cluster.', (s) =>
      orNone(text(spec(s).clusterIP)),
    ),
    column('External-IP', 'Where the Service is reached from outside.', externalIp),
    column('Port(s)', 'The ports the Service exposes.', ports),
    age,
    column(
      'Selector',
      'The Pods the Service sends traffic to.',
      (s) => labelList(spec(s).selector),
      1,
    ),
  ],
  nodes: [
    name,
    column('Status', 'Whether the node is Ready.', nodeStatus),
    column('Roles', 'The node-role labels.', roles),
    age,
    column('Version', 'The kubelet version.', (n) => text(nodeInfo(n).kubeletVersion)),
    column('Internal-IP', 'The node InternalIP address.', (n) => address(n, 'InternalIP'), 1),
    column('External-IP', 'The node ExternalIP address.', (n) => address(n, 'ExternalIP'), 1),
    column('OS-Image', 'The OS image.', (n) => unknown(text(nodeInfo(n).osImage)), 1),
    column(
      'Kernel-Version',
      'The kernel version.',
      (n) => unknown(text(nodeInfo(n).kernelVersion)),
      1,
    ),
    column(
      'Container-Runtime',
      'The container runtime and its version.',
      (n) => unknown(text(nodeInfo(n).containerRuntimeVersion)),
      1,
    ),
  ],
  events: [
    { ...column('Last Seen', 'When the event last happened.', lastSeen), type: 'string' },
    column('Type', 'Normal or Warning.', (e) => text(e.type)),
    column('Reason', 'Why the event happened, in one word.', (e) => text(e.reason)),
    column('Object', 'What the event is about.', (e) => {
      const involved = object(e.involvedObject);
      return `${text(involved.kind).toLowerCase()}/${text(involved.name)}`;
    }),
    column('Subobject', 'Which part of it.', (e) => text(object(e.involvedObject).fieldPath), 1),
    column('Source', 'Who reported it.', eventSource, 1),
    column('Message', 'What happened.', (e) => text(e.message).trim()),
    column(
      'First Seen',
      'When the event first happened.',
      (e, now) => since(e.firstTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp, now),
      1,
    ),
    {
      ...column('Count', 'How many times it happened.', (e) => Number(e.count ?? 1), 1),
      type: 'integer',
    },
    column('Name', 'The event object.', (e) => text(e.metadata.name), 1),
  ],
  namespaces: [
    name,
    column('Status', 'The namespace phase.', (n) => text(object(n.status).phase)),
    age,
  ],
  endpointslices: [
    name,
    column('AddressType', 'IPv4, IPv6 or FQDN.', (e) => text(e.addressType)),
    column('Ports', 'The ports the endpoints listen on.', slicePorts),
    column('Endpoints', 'The endpoints, the first three of them.', sliceEndpoints),
    age,
  ],
};

function column(
  title: string,
  description: string,
  cell: Column['cell'],
  priority: 0 | 1 = 0,
): Column {
  return { name: title, type: 'string', description, priority, cell };
}

function text(value: Json | undefined): string {
  return typeof value === 'string' || typeof value === 'number' ? String(value) : '';
}

function object(value: Json | undefined): JsonObject {
  return isJsonObject(value) ? value : {};
}

function spec(service: StoredObject): JsonObject {
  return object(service.spec);
}

function orNone(value: string): string {
  return value === '' ? '<none>' : value;
}

function unknown(value: string): string {
  return value === '' ? '<unknown>' : value;
}

function labelList(value: Json | undefined): string {
  const entries = Object.entries(object(value)).sort(([a], [b]) => a.localeCompare(b));
  return entries.length === 0 ? '<none>' : entries.map(([k, v]) => `${k}=${text(v)}`).join(',');
}

/** As a real server prints it: the load balancer's addresses, `<pending>` while it has none. */
function externalIp(service: StoredObject): string {
  const given = Array.isArray(spec(service).externalIPs) ? spec(service).externalIPs : [];
  const externalIPs = (given as Json[]).map(text).filter(Boolean);
  switch (text(spec(service).type)) {
    case 'ExternalName':
      return text(spec(service).externalName);
    case 'LoadBalancer': {
      const ingress = object(object(service.status).loadBalancer).ingress;
      const addresses = (Array.isArray(ingress) ? ingress : [])
        .map((entry) => text(object(entry).ip) || text(object(entry).hostname))
        .filter(Boolean);
      const all = [...addresses, ...externalIPs];
      return all.length === 0 ? '<pending>' : all.join(',');
    }
    default:
      return externalIPs.length === 0 ? '<none>' : externalIPs.join(',');
  }
}

function ports(service: StoredObject): string {
  const list = Array.isArray(spec(service).ports) ? (spec(service).ports as Json[]) : [];
  const printed = list.map((entry) => {
    const port = object(entry);
    const protocol = text(port.protocol) || 'TCP';
    return typeof port.nodePort === 'number' && port.nodePort !== 0
      ? `${text(port.port)}:${port.nodePort}/${protocol}`
      : `${text(port.port)}/${protocol}`;
  });
  return printed.length === 0 ? '<none>' : printed.join(',');
}

function nodeInfo(node: StoredObject): JsonObject {
  return object(object(node.status).nodeInfo);
}

function nodeStatus(node: StoredObject): string {
  const conditions = object(node.status).conditions;
  const ready = (Array.isArray(conditions) ? conditions : [])
    .map(object)
    .find((condition) => condition.type === 'Ready');
  const status =
    ready?.status === 'True' ? 'Ready' : ready?.status === 'False' ? 'NotReady' : 'Unknown';
  return object(node.spec).unschedulable === true ? `${status},SchedulingDisabled` : status;
}

function roles(node: StoredObject): string {
  const found = new Set<string>();
  for (const [key, value] of Object.entries(object(node.metadata.labels))) {
    if (key.startsWith('node-role.kubernetes.io/')) {
      const role = key.slice('node-role.kubernetes.io/'.length);
      if (role !== '') found.add(role);
    } else if (key === 'kubernetes.io/role' && text(value) !== '') {
      found.add(text(value));
    }
  }
  return found.size === 0 ? '<none>' : [...found].sort().join(',');
}

function address(node: StoredObject, type: string): string {
  const addresses = object(node.status).addresses;
  const found = (Array.isArray(addresses) ? addresses : [])
    .map(object)
    .find((entry) => entry.type === type);
  return orNone(text(found?.address));
}

function eventSource(event: StoredObject): string {
  const source = object(event.source);
  const component = text(source.component) || text(event.reportingComponent);
  const host = text(source.host);
  return host === '' ? component : `${component}, ${host}`;
}

function lastSeen(event: StoredObject, now: number): string {
  const last = event.lastTimestamp ?? event.eventTime ?? event.metadata.creationTimestamp;
  const count = typeof event.count === 'number' ? event.count : 1;
  const seen = since(last, now);
  if (count <= 1 || event.firstTimestamp === undefined) return seen;
  return `${seen} (x${count} over ${since(event.firstTimestamp, now)})`;
}

/** Time since `timestamp`, in the short form kubectl prints (`45s`, `3m12s`, `5h`, `12d`). */
export function since(timestamp: Json | undefined, now: number): string {
  const at = typeof timestamp === 'string' ? Date.parse(timestamp) : Number.NaN;
  if (Number.isNaN(at)) return '<unknown>';
  return humanDuration((now - at) / 1000);
}

/** The API machinery's coarse duration: finer near now, coarser further away. */
export function humanDuration(totalSeconds: number): string {
  const seconds = Math.floor(totalSeconds);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return withRest(minutes, 'm', seconds % 60, 's');
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return withRest(hours, 'h', minutes % 60, 'm');
  if (hours < 48) return `${hours}h`;
  const days = Math.floor(hours / 24);
  if (hours < 24 * 8) return withRest(days, 'd', hours % 24, 'h');
  if (hours < 24 * 365 * 2) return `${days}d`;
  const years = Math.floor(days / 365);
  if (hours < 24 * 365 * 8) return withRest(years, 'y', days % 365, 'd');
  return `${years}y`;
}

function withRest(whole: number, unit: string, rest: number, restUnit: string): string {
  return rest === 0 ? `${whole}${unit}` : `${whole}${unit}${rest}${restUnit}`;
}

function slicePorts(slice: StoredObject): string {
  const ports = Array.isArray(slice.ports) ? slice.ports : [];
  const printed = ports.map((port) => text(object(port).port)).filter(Boolean);
  return printed.length === 0 ? '<unset>' : printed.join(',');
}

function sliceEndpoints(slice: StoredObject): string {
  const endpoints = Array.isArray(slice.endpoints) ? slice.endpoints : [];
  const addresses = endpoints.flatMap((endpoint) => {
    const list = object(endpoint).addresses;
    return Array.isArray(list) ? list.map(text) : [];
  });
  if (addresses.length === 0) return '<unset>';
  const shown = addresses.slice(0, 3).join(',');
  return addresses.length > 3 ? `${shown} + ${addresses.length - 3} more...` : shown;
}
