import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAllYaml, loadYaml, type V1Deployment } from '@kubernetes/client-node';
import {
  authenticatedGroup,
  RbacAuthorizer,
  serviceAccountUser,
  type UserInfo,
} from './fake-kube/rbac';
import { packageRoot } from '../package/package-root';

/** The package's Kubernetes manifests: what `kubectl apply -k infra/k8s` installs. */
export const manifestsDir = join(packageRoot(), 'infra', 'k8s');

/**
 * The Kubernetes group the functions' EKS access entry maps their IAM role to. The stack's
 * `controllerGroup` (infra/controller-stack.ts) is the one deployed; this copy exists because that
 * module loads the CDK, seconds the local mode and every runtime test would wait for, and
 * test/infra/project-rbac.test.ts holds the two equal.
 */
export const controllerGroup = 'serverless-service-controller';

/** The project's RBAC as a cluster would enforce it, and who its components are there. */
export interface ProjectRbac {
  readonly authorizer: RbacAuthorizer;
  /** The functions, as EKS authenticates their role: a user in the access entry's group. */
  readonly functions: UserInfo;
  /** The forwarder: its Deployment's ServiceAccount, in the kustomization's namespace. */
  readonly forwarder: UserInfo;
}

interface Kustomization {
  readonly namespace?: string;
  readonly resources?: readonly string[];
}

interface Manifest {
  kind?: string;
  metadata?: { name?: string; namespace?: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}

const clusterScoped = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding']);

/**
 * The objects of the kustomization in `dir` (its `resources` files; generated ConfigMaps carry no
 * RBAC) with its namespace applied as kustomize applies it: to every namespaced object, and to
 * binding subjects only for a ServiceAccount named `default` (kustomize's `defaultOnly`).
 */
export function loadKustomization(dir = manifestsDir): unknown[] {
  const kustomization = loadYaml<Kustomization>(
    readFileSync(join(dir, 'kustomization.yaml'), 'utf8'),
  );
  const namespace = kustomization.namespace;
  const objects = (kustomization.resources ?? []).flatMap(
    (file) => loadAllYaml(readFileSync(join(dir, file), 'utf8')) as Manifest[],
  );
  if (namespace === undefined) return objects;
  for (const object of objects) {
    if (!clusterScoped.has(object.kind ?? '')) {
      object.metadata = { ...object.metadata, namespace };
    }
    for (const subject of object.subjects ?? []) {
      if (subject.kind === 'ServiceAccount' && subject.name === 'default') {
        subject.namespace = namespace;
      }
    }
  }
  return objects;
}

export function loadProjectRbac(dir = manifestsDir): ProjectRbac {
  const objects = loadKustomization(dir);
  const deployments = objects.filter(
    (o): o is V1Deployment => (o as Manifest).kind === 'Deployment',
  );
  const [deployment] = deployments;
  if (deployment === undefined || deployments.length !== 1) {
    throw new Error(
      `expected the forwarder's Deployment alone in ${dir}, found ${deployments.length}`,
    );
  }
  return {
    authorizer: new RbacAuthorizer(objects),
    functions: {
      name: 'serverless-service-controller-functions',
      groups: [controllerGroup, authenticatedGroup],
    },
    forwarder: serviceAccountUser(
      deployment.metadata?.namespace ?? 'default',
      deployment.spec?.template.spec?.serviceAccountName ?? 'default',
    ),
  };
}
