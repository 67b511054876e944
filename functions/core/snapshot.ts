import { canonicalJson, type JsonValue } from './hash';
import type { Service } from './objects';

/**
 * The part of a Service that state keeps so its load balancer can be deleted after the Service is
 * gone (S7): identity, annotations and spec. Status, finalizers and timestamps are left out, so it
 * is plain JSON.
 */
export function serviceSnapshot(service: Service): Service {
  const metadata = service.metadata ?? {};
  return structuredClone({
    metadata: {
      name: metadata.name,
      namespace: metadata.namespace,
      uid: metadata.uid,
      ...(metadata.annotations ? { annotations: { ...metadata.annotations } } : {}),
    },
    spec: service.spec ?? {},
  });
}

/** Whether two snapshots are the same, whatever the order of their keys. */
export function sameSnapshot(a: Service, b: Service): boolean {
  return canonicalJson(a as JsonValue) === canonicalJson(b as JsonValue);
}
