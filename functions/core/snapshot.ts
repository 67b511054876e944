import { canonicalJson, type JsonValue } from './hash';
import type { Service } from './objects';

/**
 * Annotations a load balancer is built from: the cloud provider's (`service.beta.kubernetes.io/`)
 * and ours. Others (kubectl's last-applied-configuration above all, up to the API server's 256 KiB)
 * say nothing about the load balancer and would only fill the state item.
 */
const snapshotAnnotationPrefixes = [
  'service.beta.kubernetes.io/',
  'serverless-service-controller.io/',
];

/**
 * The part of a Service that state keeps so its load balancer can be deleted after the Service is
 * gone (S7): identity, load balancer annotations and spec. Status, finalizers and timestamps are
 * left out, so it is plain JSON.
 */
export function serviceSnapshot(service: Service): Service {
  const metadata = service.metadata ?? {};
  const annotations = Object.entries(metadata.annotations ?? {}).filter(([name]) =>
    snapshotAnnotationPrefixes.some((prefix) => name.startsWith(prefix)),
  );
  return structuredClone({
    metadata: {
      name: metadata.name,
      namespace: metadata.namespace,
      uid: metadata.uid,
      ...(annotations.length > 0 ? { annotations: Object.fromEntries(annotations) } : {}),
    },
    spec: service.spec ?? {},
  });
}

/** Whether two snapshots are the same, whatever the order of their keys. */
export function sameSnapshot(a: Service, b: Service): boolean {
  return canonicalJson(a as JsonValue) === canonicalJson(b as JsonValue);
}
