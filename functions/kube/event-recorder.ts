import { setTimeout as sleep } from 'node:timers/promises';
import type { ControllerEvent } from '../core/events';
import { stableHash } from '../core/hash';
import type { ObjectReference } from '../core/objects';
import type { Clock, EventRecorder } from '../sync/ports';
import { KubeApiError, patchType, type KubeApiClient } from './kube-api-client';

export const eventSourceComponent = 'service-controller';

/** Writers racing on one Event each win a round; this covers any realistic number of them. */
const maxBumpAttempts = 10;

/**
 * Records Events through the core/v1 Events API (S18). Repeats aggregate as client-go's recorder
 * does: the same object, type, reason and message bump `count` and `lastTimestamp` of one Event.
 * The Event's name is derived from those fields, so repeats aggregate across Lambda instances too.
 * Never throws: an Event that cannot be written is reported to `onError` and dropped.
 */
export class KubeEventRecorder implements EventRecorder {
  constructor(
    private readonly makeApi: () => Promise<KubeApiClient>,
    private readonly clock: Clock,
    private readonly onError: (error: unknown, event: ControllerEvent) => void = () => undefined,
  ) {}

  /**
   * count + 1 as a JSON patch that first tests the count it read, so two instances bumping the
   * same Event at once cannot both write the same number; the loser reads again.
   */
  private async bump(
    api: KubeApiClient,
    name: string,
    namespace: string,
    now: Date,
  ): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const path = eventPath(namespace, name);
      const existing = await api.request<{ count?: number }>({ method: 'GET', path });
      const count = existing.count ?? 1;
      try {
        await api.request({
          method: 'PATCH',
          path,
          body: [
            { op: 'test', path: '/count', value: count },
            { op: 'replace', path: '/count', value: count + 1 },
            { op: 'add', path: '/lastTimestamp', value: now.toISOString() },
          ],
          contentType: patchType.json,
        });
        return;
      } catch (error) {
        const lostRace =
          error instanceof KubeApiError && (error.code === 422 || error.code === 409);
        if (!lostRace || attempt >= maxBumpAttempts) throw error;
        await sleep(Math.random() * 20 * attempt);
      }
    }
  }

  async record(object: ObjectReference, event: ControllerEvent): Promise<void> {
    // Events about cluster-scoped objects (Nodes) live in "default", where kubectl describe finds them.
    const namespace = object.namespace ?? 'default';
    const name = `${object.name}.${stableHash([object.kind, namespace, object.name, object.uid ?? '', event.type, event.reason, event.message]).slice(0, 16)}`;
    const now = this.clock.now();
    try {
      const api = await this.makeApi();
      const body = {
        metadata: { name, namespace },
        involvedObject: {
          apiVersion: 'v1',
          kind: object.kind,
          name: object.name,
          ...(object.namespace ? { namespace: object.namespace } : {}),
          ...(object.uid ? { uid: object.uid } : {}),
        },
        type: event.type,
        reason: event.reason,
        message: event.message,
        source: { component: eventSourceComponent },
        reportingComponent: eventSourceComponent,
        firstTimestamp: now.toISOString(),
        lastTimestamp: now.toISOString(),
        count: 1,
      };
      try {
        await api.request({ method: 'POST', path: eventPath(namespace), body });
      } catch (error) {
        if (!(error instanceof KubeApiError && error.code === 409)) throw error;
        await this.bump(api, name, namespace, now);
      }
    } catch (error) {
      this.onError(error, event);
    }
  }
}

function eventPath(namespace: string, name?: string): string {
  const events = `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`;
  return name === undefined ? events : `${events}/${encodeURIComponent(name)}`;
}
