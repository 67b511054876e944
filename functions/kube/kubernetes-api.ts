import type { KubeConnection } from './in-cluster';
import { streamListPage } from './list-stream';
import { awsErrorClass, awsErrorCode } from '../aws/aws-errors';
import type { EndpointSliceView } from '../core/endpoint-targets';
import { attributesAnnotation, wantsDeletionProtection } from '../core/deletion-protection';
import { classFinalizer, upstreamFinalizer } from '../core/claim';
import { errorMessage, NotFoundError, RetryableError, TerminalError } from '../core/errors';
import type { LoadBalancerStatus, Node, Service } from '../core/objects';
import type { KubernetesApi, NamespaceDirectory, ServiceSummary } from '../sync/ports';
import { KubeApiClient, KubeApiError, patchType } from './kube-api-client';

/** Nodes per list page: bounded memory and response size on large clusters. */
const nodePageSize = 500;
/**
 * Services per list page. A tenant may fill each of its Services up to the API server's object
 * limit (~1.5 MB), so a page is read one item at a time and each item is cut down to a summary
 * before the next is read: what a list keeps grows by a few hundred bytes per Service, and the
 * most held at once is one item's text and object (issue 32, finding 7).
 */
export const servicePageSize = 50;
/** Load balancer addresses a summary keeps: enough to tell an address is published. */
const summaryIngressLimit = 4;

interface List<T> {
  readonly items?: T[];
  readonly metadata?: { readonly continue?: string };
}

const segment = encodeURIComponent;

/**
 * The KubernetesApi port over the API server's REST paths. Patches never send the object read:
 * finalizer changes are strategic-merge patches of the list alone (others' finalizers are kept
 * without a read-modify-write race), and status is written through the status subresource.
 */
export class HttpKubernetesApi implements KubernetesApi, NamespaceDirectory {
  constructor(private readonly makeApi: () => Promise<KubeApiClient>) {}

  /** From any connection: a client-node KubeConfig (local mode, tests) has the same shape. */
  static fromConnection(connection: KubeConnection): HttpKubernetesApi {
    const api = new KubeApiClient(connection);
    return new HttpKubernetesApi(() => Promise.resolve(api));
  }

  async getService(namespace: string, name: string): Promise<Service | undefined> {
    const api = await this.connect();
    try {
      return await api.request<Service>({ method: 'GET', path: servicePath(namespace, name) });
    } catch (error) {
      if (error instanceof KubeApiError && error.code === 404) return undefined;
      throw translateKubeError(error, `read service ${namespace}/${name}`);
    }
  }

  async addFinalizer(service: Service, finalizer: string): Promise<void> {
    await this.patchService(service, { metadata: { finalizers: [finalizer] } }, 'add finalizer');
  }

  async removeFinalizer(service: Service, finalizer: string): Promise<void> {
    await this.patchService(
      service,
      { metadata: { '$deleteFromPrimitiveList/finalizers': [finalizer] } },
      'remove finalizer',
    );
  }

  async patchServiceStatus(service: Service, status: LoadBalancerStatus): Promise<void> {
    const { namespace = '', name = '' } = service.metadata ?? {};
    const api = await this.connect();
    try {
      // ingress: null clears it; a merge patch of an empty object would leave the old one.
      await api.request({
        method: 'PATCH',
        path: `${servicePath(namespace, name)}/status`,
        body: { status: { loadBalancer: { ingress: status.ingress ?? null } } },
        contentType: patchType.merge,
      });
    } catch (error) {
      throw translateKubeError(error, `patch status of service ${namespace}/${name}`);
    }
  }

  async listNodes(): Promise<Node[]> {
    const api = await this.connect();
    try {
      return await listAll<Node>(api, '/api/v1/nodes');
    } catch (error) {
      throw translateKubeError(error, 'list nodes');
    }
  }

  async listEndpointSlices(namespace: string, serviceName: string): Promise<EndpointSliceView[]> {
    const api = await this.connect();
    try {
      const slices = await listAll<EndpointSliceView>(
        api,
        `/apis/discovery.k8s.io/v1/namespaces/${segment(namespace)}/endpointslices`,
        { labelSelector: `${serviceNameLabel}=${serviceName}` },
      );
      return slices.map((slice) => sliceView(slice, namespace));
    } catch (error) {
      throw translateKubeError(
        error,
        `list endpoint slices of service ${namespace}/${serviceName}`,
      );
    }
  }

  async namespaceLabels(namespace: string): Promise<Readonly<Record<string, string>>> {
    const api = await this.connect();
    try {
      const found = await api.request<{ metadata?: { labels?: Record<string, string> } }>({
        method: 'GET',
        path: `/api/v1/namespaces/${segment(namespace)}`,
      });
      return found.metadata?.labels ?? {};
    } catch (error) {
      // A Service cannot outlive its namespace; a namespace being removed has no labels to grant.
      if (error instanceof KubeApiError && error.code === 404) return {};
      throw translateKubeError(error, `read namespace ${namespace}`);
    }
  }

  async listServices(namespace: string): Promise<ServiceSummary[]> {
    const api = await this.connect();
    const path = `/api/v1/namespaces/${segment(namespace)}/services`;
    try {
      const summaries: ServiceSummary[] = [];
      let token: string | undefined;
      do {
        const page = await streamListPage<Service>(
          api,
          path,
          servicePageSize,
          token,
          (service) => {
            summaries.push(serviceSummary(service));
          },
          api.timeoutMs,
        );
        token = page._continue || undefined;
      } while (token !== undefined);
      return summaries;
    } catch (error) {
      throw translateKubeError(error, `list services in ${namespace}`);
    }
  }

  /** The API client; failing to get one (EKS, Secrets Manager) is classed by what fixes it. */
  private async connect(): Promise<KubeApiClient> {
    try {
      return await this.makeApi();
    } catch (error) {
      const found = awsErrorClass(awsErrorCode(error));
      throw new RetryableError(`connect to the Kubernetes API: ${errorMessage(error)}`, {
        cause: error,
        failureClass: found === undefined || found === 'spec' ? 'transient' : found,
      });
    }
  }

  private async patchService(service: Service, body: object, action: string): Promise<void> {
    const { namespace = '', name = '' } = service.metadata ?? {};
    const api = await this.connect();
    try {
      await api.request({
        method: 'PATCH',
        path: servicePath(namespace, name),
        body,
        contentType: patchType.strategicMerge,
      });
    } catch (error) {
      throw translateKubeError(error, `${action} on service ${namespace}/${name}`);
    }
  }
}

function servicePath(namespace: string, name: string): string {
  return `/api/v1/namespaces/${segment(namespace)}/services/${segment(name)}`;
}

/**
 * What a Service list keeps of each Service: identity, order, type and class, our finalizers,
 * whether deletion protection is asked for, and a few load balancer addresses; never the
 * annotations themselves, ports or ranges, whatever their size.
 */
export function serviceSummary(service: Service): ServiceSummary {
  const { name, namespace, uid, creationTimestamp, deletionTimestamp, finalizers } =
    service.metadata ?? {};
  const ingress = service.status?.loadBalancer?.ingress;
  return {
    metadata: {
      name,
      namespace,
      uid,
      creationTimestamp,
      deletionTimestamp,
      // Each of ours once: a list of finalizers may repeat one many times.
      finalizers: [classFinalizer, upstreamFinalizer].filter((f) => finalizers?.includes(f)),
      // Whether deletion protection keeps its NLB (counted by the tenant policy), not the value.
      ...(wantsDeletionProtection(service)
        ? { annotations: { [attributesAnnotation]: 'deletion_protection.enabled=true' } }
        : {}),
    },
    spec: { type: service.spec?.type, loadBalancerClass: service.spec?.loadBalancerClass },
    ...(ingress === undefined
      ? {}
      : {
          status: {
            loadBalancer: {
              ingress: ingress
                .slice(0, summaryIngressLimit)
                .map(({ ip, hostname }) => ({ ip, hostname })),
            },
          },
        }),
  };
}

/** The label the EndpointSlice controller puts on a Service's slices. */
export const serviceNameLabel = 'kubernetes.io/service-name';

/** What the targets of a slice are read from, and nothing else of it (its labels, hints, zones). */
function sliceView(slice: EndpointSliceView, namespace: string): EndpointSliceView {
  return {
    namespace,
    addressType: slice.addressType,
    ports: (slice.ports ?? []).map(({ name, port, protocol }) => ({ name, port, protocol })),
    endpoints: (slice.endpoints ?? []).map(({ addresses, conditions, targetRef }) => ({
      addresses: addresses.slice(0, 1),
      conditions: {
        ready: conditions?.ready,
        serving: conditions?.serving,
        terminating: conditions?.terminating,
      },
      targetRef: { kind: targetRef?.kind, namespace: targetRef?.namespace },
    })),
  };
}

/** Every page of a list, `nodePageSize` at a time. */
async function listAll<T>(
  api: KubeApiClient,
  path: string,
  query: Readonly<Record<string, string>> = {},
): Promise<T[]> {
  const items: T[] = [];
  let token: string | undefined;
  do {
    const page = await api.request<List<T>>({
      method: 'GET',
      path,
      query: { ...query, limit: nodePageSize, continue: token },
    });
    items.push(...(page.items ?? []));
    token = page.metadata?.continue || undefined;
  } while (token !== undefined);
  return items;
}

/** Kubernetes API errors in the controller's taxonomy (docs/design.md §4). */
export function translateKubeError(error: unknown, action: string): Error {
  if (!(error instanceof KubeApiError)) {
    return new RetryableError(
      `${action}: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
  const code = error.code;
  const detail = statusMessage(error.body) ?? error.message;
  const text = `${action}: ${code} ${detail}`;
  if (code === 404) return new NotFoundError(text, { cause: error });
  // The function's identity lacks access (RBAC, access entry) or its token is refused: someone
  // must fix it, and the next retry after the fix succeeds.
  if (code === 401 || code === 403) {
    return new RetryableError(text, { cause: error, failureClass: 'permission' });
  }
  if (code === 429) return new RetryableError(text, { cause: error, failureClass: 'throttling' });
  // 422 (Invalid) and 400 are refusals of what we sent; retrying the same request cannot help.
  if (code === 422 || code === 400) return new TerminalError(text, { cause: error });
  return new RetryableError(text, { cause: error });
}

function statusMessage(body: unknown): string | undefined {
  let parsed = body;
  if (typeof body === 'string') {
    try {
      parsed = JSON.parse(body);
    } catch {
      return body || undefined;
    }
  }
  if (typeof parsed === 'object' && parsed !== null && 'message' in parsed) {
    const message = parsed.message;
    return typeof message === 'string' ? message : undefined;
  }
  return undefined;
}
