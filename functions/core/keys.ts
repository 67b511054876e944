import type { Service } from './objects';
import { TerminalError } from './errors';

/** Work is keyed by `namespace/name` (S4). */
export type ServiceKey = string;

export function serviceKey(service: Service): ServiceKey {
  return `${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`;
}

// DNS-1123 labels: what Kubernetes allows for namespace and Service names.
const dnsLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export function parseServiceKey(key: string): { namespace: string; name: string } {
  const parts = key.split('/');
  const [namespace = '', name = ''] = parts;
  if (parts.length !== 2 || !dnsLabel.test(namespace) || !dnsLabel.test(name)) {
    throw new TerminalError(`invalid Service key "${key}": expected <namespace>/<name>`);
  }
  return { namespace, name };
}
