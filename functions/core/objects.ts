/**
 * The parts of Kubernetes objects the controller reads, as plain structural types. They accept the
 * objects `@kubernetes/client-node` returns without the core depending on that library, and they
 * are read-only so no code path can mutate an object read from the API (S13).
 */

export interface ObjectMeta {
  readonly name?: string | undefined;
  readonly namespace?: string | undefined;
  readonly uid?: string | undefined;
  readonly resourceVersion?: string | undefined;
  readonly labels?: Readonly<Record<string, string>> | undefined;
  readonly annotations?: Readonly<Record<string, string>> | undefined;
  readonly finalizers?: readonly string[] | undefined;
  /** client-node parses it into a Date; a raw JSON object carries the string. */
  readonly deletionTimestamp?: Date | string | undefined;
  /** As deletionTimestamp: a Date from client-node, a string in raw JSON. */
  readonly creationTimestamp?: Date | string | undefined;
}

export interface ServicePort {
  readonly name?: string | undefined;
  readonly protocol?: string | undefined;
  readonly appProtocol?: string | undefined;
  readonly port: number;
  readonly nodePort?: number | undefined;
  /** The pods' port: a number or the name of a container port. */
  readonly targetPort?: number | string | undefined;
}

export interface ServiceSpec {
  readonly type?: string | undefined;
  readonly loadBalancerClass?: string | undefined;
  readonly ports?: readonly ServicePort[] | undefined;
  readonly loadBalancerSourceRanges?: readonly string[] | undefined;
  readonly sessionAffinity?: string | undefined;
  readonly loadBalancerIP?: string | undefined;
  readonly externalIPs?: readonly string[] | undefined;
  readonly externalTrafficPolicy?: string | undefined;
  readonly healthCheckNodePort?: number | undefined;
  readonly ipFamilies?: readonly string[] | undefined;
  readonly allocateLoadBalancerNodePorts?: boolean | undefined;
}

export interface PortStatus {
  readonly port: number;
  readonly protocol: string;
  readonly error?: string | undefined;
}

export interface LoadBalancerIngress {
  readonly ip?: string | undefined;
  readonly hostname?: string | undefined;
  readonly ipMode?: string | undefined;
  readonly ports?: readonly PortStatus[] | undefined;
}

export interface LoadBalancerStatus {
  readonly ingress?: readonly LoadBalancerIngress[] | undefined;
}

export interface Service {
  readonly metadata?: ObjectMeta | undefined;
  readonly spec?: ServiceSpec | undefined;
  readonly status?: { readonly loadBalancer?: LoadBalancerStatus | undefined } | undefined;
}

export interface Taint {
  readonly key: string;
  readonly value?: string | undefined;
  readonly effect: string;
}

export interface NodeCondition {
  readonly type: string;
  readonly status: string;
}

export interface Node {
  readonly metadata?: ObjectMeta | undefined;
  readonly spec?:
    | {
        readonly providerID?: string | undefined;
        readonly unschedulable?: boolean | undefined;
        readonly taints?: readonly Taint[] | undefined;
      }
    | undefined;
  readonly status?: { readonly conditions?: readonly NodeCondition[] | undefined } | undefined;
}

/** What an Event is about. */
export interface ObjectReference {
  readonly kind: 'Service' | 'Node';
  readonly namespace?: string | undefined;
  readonly name: string;
  readonly uid?: string | undefined;
}

export function serviceReference(service: Service): ObjectReference {
  return {
    kind: 'Service',
    namespace: service.metadata?.namespace,
    name: service.metadata?.name ?? '',
    uid: service.metadata?.uid,
  };
}

export function nodeReference(node: Node): ObjectReference {
  return { kind: 'Node', name: node.metadata?.name ?? '', uid: node.metadata?.uid };
}

export function isBeingDeleted(object: { readonly metadata?: ObjectMeta | undefined }): boolean {
  const timestamp = object.metadata?.deletionTimestamp;
  return timestamp !== undefined && timestamp !== null && timestamp !== '';
}
