import type { V1Node, V1Service } from '@kubernetes/client-node';

/** A LoadBalancer Service with two TCP ports; tweak fields per test. */
export function loadBalancerService(name: string, namespace = 'default'): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace },
    spec: {
      type: 'LoadBalancer',
      selector: { app: name },
      ports: [
        { name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 },
        { name: 'https', protocol: 'TCP', port: 443, targetPort: 8443 },
      ],
    },
  };
}

/** A Ready EC2-backed node. */
export function readyNode(name: string, instanceId = 'i-0123456789abcdef0'): V1Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'kubernetes.io/hostname': name } },
    spec: { providerID: `aws:///us-east-1a/${instanceId}` },
    status: {
      conditions: [{ type: 'Ready', status: 'True' }],
      addresses: [{ type: 'InternalIP', address: '10.0.0.10' }],
    },
  };
}

/** `service.beta.kubernetes.io/aws-load-balancer-<suffix>`: the annotations tests set most. */
export const awsAnnotation = (suffix: string) =>
  `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;

/** A Service change that sets exactly these annotations. */
export const annotated =
  (annotations: Record<string, string>) =>
  (s: V1Service): V1Service => ({ ...s, metadata: { ...s.metadata, annotations } });
