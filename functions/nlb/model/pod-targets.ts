import { ipTargetsFor, type EndpointSliceView } from '../../core/endpoint-targets';
import type { Service } from '../../core/objects';
import { ipTargetId } from './target-ids';

/**
 * The pods behind one listener, from the Service's EndpointSlices: those that serve, as `ip:port`,
 * sorted. A TCP_UDP listener's pods are those of its TCP port (both share a targetPort,
 * core/lb-ports.ts). The model and the targets update read them alike.
 */
export function servingPodIds(
  service: Service,
  listenerPort: number,
  listenerProtocol: 'TCP' | 'UDP' | 'TCP_UDP',
  slices: readonly EndpointSliceView[],
): string[] {
  const protocol = listenerProtocol === 'TCP_UDP' ? 'TCP' : listenerProtocol;
  const servicePort = (service.spec?.ports ?? []).find(
    (p) => p.port === listenerPort && (p.protocol ?? 'TCP') === protocol,
  );
  return ipTargetsFor({ name: servicePort?.name, protocol }, slices, 'IPv4').serving.map(
    ipTargetId,
  );
}
