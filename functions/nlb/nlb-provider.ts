import type { EndpointSliceView } from '../core/endpoint-targets';
import { stableHash } from '../core/hash';
import type { Host } from '../core/hosts';
import type { LoadBalancerStatus, Service } from '../core/objects';
import type {
  DeleteResult,
  EnsureOptions,
  EnsureResult,
  LoadBalancerProvider,
  ProviderState,
  UpdateOptions,
  UpdateResult,
} from '../sync/ports';
import type { NlbClients } from '../aws/clients';
import { sendsCounted, sentSoFar } from '../aws/registration-budget';
import { RequeueAfterError } from '../core/errors';
import { parseAnnotations } from './model/annotations';
import { awsPrefix, type LoadBalancerOptions } from './model/annotation-types';
import { schemeOf, type ProviderSettings } from './model/desired';
import { loadBalancerName } from './model/naming';
import { ensureLoadBalancerDeleted } from './delete-load-balancer';
import { ensureLoadBalancer } from './ensure-load-balancer';
import type { ProviderContext } from './provider-context';
import { getLoadBalancer, ownersInCluster, taggingApiLoader } from './tagged-resources';
import type { TenantPolicyEnforcer } from './tenant-policy-check';
import { updateEndpointTargets } from './update-pod-targets';
import { updateLoadBalancer } from './update-targets';

/** Bump when the desired model changes meaning, so every checkpoint misses once. */
export const nlbModelVersion = 1;

/**
 * The LoadBalancerProvider for AWS Network Load Balancers with instance targets on the Services'
 * NodePorts, or pod targets from their EndpointSlices (`nlb-target-type: ip`): desired model →
 * observed → plan → apply, owned by tags, found by stored ARNs.
 * Each operation is a module of its own (ensure-load-balancer.ts, update-targets.ts,
 * delete-load-balancer.ts, tagged-resources.ts), given this provider's context.
 */
export class NlbProvider implements LoadBalancerProvider {
  readonly fingerprint: string;
  private readonly context: ProviderContext;

  constructor(
    clients: NlbClients,
    settings: ProviderSettings,
    tenantPolicy?: TenantPolicyEnforcer,
    options: { readonly now?: () => number } = {},
  ) {
    this.context = {
      clients,
      settings,
      tenantPolicy,
      now: options.now ?? Date.now,
      taggingApi: taggingApiLoader(clients),
    };
    this.fingerprint = stableHash({
      model: nlbModelVersion,
      settings: { ...settings, defaultTags: { ...settings.defaultTags } },
      // Absent without a policy, so adding this setting left every checkpoint as it was.
      tenantPolicy: tenantPolicy?.fingerprint,
    });
  }

  getLoadBalancerName(service: Service): string {
    const options = this.optionsOrDefaults(service);
    const { settings } = this.context;
    return (
      options.loadBalancerName ??
      loadBalancerName(settings.clusterName, service, schemeOf(options, settings))
    );
  }

  getLoadBalancer(
    service: Service,
    state: ProviderState | undefined,
  ): Promise<{ exists: boolean; status?: LoadBalancerStatus }> {
    return getLoadBalancer(this.context, service, state);
  }

  ensureLoadBalancer(
    service: Service,
    hosts: readonly Host[],
    state: ProviderState | undefined,
    hooks: EnsureOptions = {},
  ): Promise<EnsureResult> {
    const { elbv2, ec2 } = this.context.clients;
    if (!sendsCounted(elbv2, ec2))
      return ensureLoadBalancer(this.context, service, hosts, state, hooks);
    // A pass that must come back before it sent AWS any change leaves the record as it is.
    const before = sentSoFar();
    return ensureLoadBalancer(this.context, service, hosts, state, hooks).catch(
      (error: unknown) => {
        if (error instanceof RequeueAfterError && sentSoFar() === before)
          Object.assign(error, { awsUnchanged: true });
        throw error;
      },
    );
  }

  /** Node changes only (update-targets.ts); without any recorded target group, a full Ensure. */
  updateLoadBalancer(
    service: Service,
    hosts: readonly Host[],
    state: ProviderState | undefined,
    options: UpdateOptions = {},
  ): Promise<UpdateResult> {
    // The fall-back goes through the instance, not the module function: whoever wraps this
    // provider's ensureLoadBalancer (a test counting syncs, say) sees that Ensure too.
    return updateLoadBalancer(this.context, service, hosts, state, options, () =>
      this.ensureLoadBalancer(service, hosts, state),
    );
  }

  /**
   * `nlb-target-type: ip` (or `type: nlb-ip`), read from those two annotations alone: a mistake
   * in another annotation must not make a Service with pod targets look for nodes (and NodePorts)
   * before its Ensure reports the mistake.
   */
  targetsFromEndpoints(service: Service): boolean {
    const annotations = service.metadata?.annotations ?? {};
    return (
      annotations[`${awsPrefix}nlb-target-type`] === 'ip' ||
      annotations[`${awsPrefix}type`] === 'nlb-ip'
    );
  }

  /** Endpoint changes only (update-pod-targets.ts). */
  updateEndpointTargets(
    service: Service,
    slices: readonly EndpointSliceView[],
    state: ProviderState | undefined,
    options: UpdateOptions = {},
  ): Promise<UpdateResult> {
    return updateEndpointTargets(this.context, service, slices, state, options);
  }

  ensureLoadBalancerDeleted(
    service: Service,
    state: ProviderState | undefined,
  ): Promise<DeleteResult> {
    return ensureLoadBalancerDeleted(this.context, service, state);
  }

  /** Every owner of this cluster's resources, for the sweep (tagged-resources.ts). */
  /**
   * Loads the tagging API now instead of on the first deletion: for a caller whose clock must
   * not run while a module loads (the benchmark's virtual clock); nothing is sent.
   */
  async loadTaggingApi(): Promise<void> {
    await this.context.taggingApi();
  }

  ownersInCluster(): Promise<Map<string, string>> {
    return ownersInCluster(this.context);
  }

  /** Annotations for naming only: a bad annotation falls back to defaults here (Ensure reports it). */
  private optionsOrDefaults(service: Service): LoadBalancerOptions {
    try {
      return parseAnnotations(service);
    } catch {
      return parseAnnotations({ metadata: {} });
    }
  }
}
