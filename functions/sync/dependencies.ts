import type { ClaimPolicy } from '../core/claim';
import type { NodePolicy } from '../core/node-policy';
import type {
  Clock,
  EventRecorder,
  KubernetesApi,
  LifecycleRecorder,
  LoadBalancerProvider,
  StateStore,
} from './ports';

/** Everything a use case needs, injected. */
export interface SyncDependencies {
  readonly kube: KubernetesApi;
  readonly provider: LoadBalancerProvider;
  readonly state: StateStore;
  readonly events: EventRecorder;
  readonly lifecycle: LifecycleRecorder;
  readonly clock: Clock;
  readonly claim: ClaimPolicy;
  readonly nodePolicy: NodePolicy;
}
