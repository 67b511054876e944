import {
  ApiException,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1Node,
  type V1Service,
} from '@kubernetes/client-node';
import { awsErrorClass, awsErrorCode } from '../aws/aws-errors';
import { errorMessage, NotFoundError, RetryableError, TerminalError } from '../core/errors';
import type { LoadBalancerStatus, Node, Service } from '../core/objects';
import type { KubernetesApi, NamespaceDirectory } from '../sync/ports';

const strategic = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** Nodes per list page: bounded memory and response size on large clusters. */
const nodePageSize = 500;

/**
 * The KubernetesApi port on @kubernetes/client-node. Patches never send the object read: finalizer
 * changes are strategic-merge patches of the list alone (others' finalizers are kept without a
 * read-modify-write race), and status is written through the status subresource.
 */
export class ClientNodeKubernetesApi implements KubernetesApi, NamespaceDirectory {
  constructor(private readonly makeApi: () => Promise<CoreV1Api>) {}

  static fromKubeConfig(kc: KubeConfig): ClientNodeKubernetesApi {
    const api = kc.makeApiClient(CoreV1Api);
    return new ClientNodeKubernetesApi(() => Promise.resolve(api));
  }

  async getService(namespace: string, name: string): Promise<Service | undefined> {
    const api = await this.connect();
    try {
      return await api.readNamespacedService({ name, namespace });
    } catch (error) {
      if (error instanceof ApiException && error.code === 404) return undefined;
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
      await api.patchNamespacedServiceStatus(
        {
          name,
          namespace,
          body: { status: { loadBalancer: { ingress: status.ingress ?? null } } },
        },
        merge,
      );
    } catch (error) {
      throw translateKubeError(error, `patch status of service ${namespace}/${name}`);
    }
  }

  async listNodes(): Promise<Node[]> {
    const api = await this.connect();
    const nodes: V1Node[] = [];
    let token: string | undefined;
    try {
      do {
        const page = await api.listNode({
          limit: nodePageSize,
          ...(token ? { _continue: token } : {}),
        });
        nodes.push(...page.items);
        token = page.metadata?._continue || undefined;
      } while (token !== undefined);
    } catch (error) {
      throw translateKubeError(error, 'list nodes');
    }
    return nodes;
  }

  async namespaceLabels(namespace: string): Promise<Readonly<Record<string, string>>> {
    const api = await this.connect();
    try {
      return (await api.readNamespace({ name: namespace })).metadata?.labels ?? {};
    } catch (error) {
      // A Service cannot outlive its namespace; a namespace being removed has no labels to grant.
      if (error instanceof ApiException && error.code === 404) return {};
      throw translateKubeError(error, `read namespace ${namespace}`);
    }
  }

  async listServices(namespace: string): Promise<Service[]> {
    const api = await this.connect();
    const services: V1Service[] = [];
    let token: string | undefined;
    try {
      do {
        const page = await api.listNamespacedService({
          namespace,
          limit: nodePageSize,
          ...(token ? { _continue: token } : {}),
        });
        services.push(...page.items);
        token = page.metadata?._continue || undefined;
      } while (token !== undefined);
    } catch (error) {
      throw translateKubeError(error, `list services in ${namespace}`);
    }
    return services;
  }

  /** The API client; failing to get one (EKS, Secrets Manager) is classed by what fixes it. */
  private async connect(): Promise<CoreV1Api> {
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
      await api.patchNamespacedService({ name, namespace, body }, strategic);
    } catch (error) {
      throw translateKubeError(error, `${action} on service ${namespace}/${name}`);
    }
  }
}

/** Kubernetes API errors in the controller's taxonomy (DESIGN §4). */
export function translateKubeError(error: unknown, action: string): Error {
  if (!(error instanceof ApiException)) {
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
