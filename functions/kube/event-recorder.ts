import type { CoreV1Api } from '@kubernetes/client-node';
import {
  ApiException,
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Event,
} from '@kubernetes/client-node';
import type { ControllerEvent } from '../core/events';
import { stableHash } from '../core/hash';
import type { ObjectReference } from '../core/objects';
import type { Clock, EventRecorder } from '../sync/ports';

export const eventSourceComponent = 'service-controller';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/**
 * Records Events through the core/v1 Events API (S18). Repeats aggregate as client-go's recorder
 * does: the same object, type, reason and message bump `count` and `lastTimestamp` of one Event.
 * The Event's name is derived from those fields, so repeats aggregate across Lambda instances too.
 * Never throws: an Event that cannot be written is reported to `onError` and dropped.
 */
export class KubeEventRecorder implements EventRecorder {
  constructor(
    private readonly makeApi: () => Promise<CoreV1Api>,
    private readonly clock: Clock,
    private readonly onError: (error: unknown, event: ControllerEvent) => void = () => undefined,
  ) {}

  async record(object: ObjectReference, event: ControllerEvent): Promise<void> {
    // Events about cluster-scoped objects (Nodes) live in "default", where kubectl describe finds them.
    const namespace = object.namespace ?? 'default';
    const name = `${object.name}.${stableHash([object.kind, namespace, object.name, object.uid ?? '', event.type, event.reason, event.message]).slice(0, 16)}`;
    const now = this.clock.now();
    try {
      const api = await this.makeApi();
      const body: CoreV1Event = {
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
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      };
      try {
        await api.createNamespacedEvent({ namespace, body });
      } catch (error) {
        if (!(error instanceof ApiException && error.code === 409)) throw error;
        const existing = await api.readNamespacedEvent({ name, namespace });
        await api.patchNamespacedEvent(
          {
            name,
            namespace,
            body: { count: (existing.count ?? 1) + 1, lastTimestamp: now.toISOString() },
          },
          merge,
        );
      }
    } catch (error) {
      this.onError(error, event);
    }
  }
}
