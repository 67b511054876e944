import type { Node, NodeCondition, Service, ServicePort, Taint } from '../functions/core/objects';

export interface ServiceOptions {
  readonly name?: string;
  readonly namespace?: string;
  readonly uid?: string;
  readonly type?: string;
  readonly loadBalancerClass?: string;
  readonly ports?: readonly ServicePort[];
  readonly annotations?: Record<string, string>;
  readonly finalizers?: readonly string[];
  readonly deleting?: boolean;
  readonly hostname?: string;
  readonly spec?: Service['spec'];
}

/** A Service as the API server returns it: type LoadBalancer, two TCP ports with nodePorts. */
export function makeService(options: ServiceOptions = {}): Service {
  return {
    metadata: {
      name: options.name ?? 'web',
      namespace: options.namespace ?? 'default',
      uid: options.uid ?? 'uid-1',
      resourceVersion: '100',
      ...(options.annotations ? { annotations: options.annotations } : {}),
      ...(options.finalizers ? { finalizers: [...options.finalizers] } : {}),
      ...(options.deleting ? { deletionTimestamp: '2026-11-30T11:00:00Z' } : {}),
    },
    spec: {
      type: options.type ?? 'LoadBalancer',
      ...(options.loadBalancerClass !== undefined
        ? { loadBalancerClass: options.loadBalancerClass }
        : {}),
      ports: options.ports ?? [
        { name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 },
        { name: 'https', protocol: 'TCP', port: 443, nodePort: 30443 },
      ],
      sessionAffinity: 'None',
      externalTrafficPolicy: 'Cluster',
      ipFamilies: ['IPv4'],
      ...options.spec,
    },
    status: {
      loadBalancer: options.hostname ? { ingress: [{ hostname: options.hostname }] } : {},
    },
  };
}

export interface NodeOptions {
  readonly instanceId?: string;
  readonly providerID?: string;
  readonly ready?: 'True' | 'False' | 'Unknown';
  readonly conditions?: readonly NodeCondition[];
  readonly unschedulable?: boolean;
  readonly labels?: Record<string, string>;
  readonly taints?: readonly Taint[];
  readonly deleting?: boolean;
}

let instanceCounter = 0;

/** A Ready EC2 node; each call gets a distinct instance ID unless one is given. */
export function makeNode(name: string, options: NodeOptions = {}): Node {
  const instanceId =
    options.instanceId ??
    `i-${(0x0a000000000000000n + BigInt(++instanceCounter)).toString(16).padStart(17, '0')}`;
  return {
    metadata: {
      name,
      ...(options.labels ? { labels: options.labels } : {}),
      ...(options.deleting ? { deletionTimestamp: '2026-11-30T11:00:00Z' } : {}),
    },
    spec: {
      providerID: options.providerID ?? `aws:///us-east-1a/${instanceId}`,
      ...(options.unschedulable !== undefined ? { unschedulable: options.unschedulable } : {}),
      ...(options.taints ? { taints: options.taints } : {}),
    },
    status: {
      conditions: options.conditions ?? [{ type: 'Ready', status: options.ready ?? 'True' }],
    },
  };
}
