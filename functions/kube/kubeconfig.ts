import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join } from 'node:path';
import { load } from 'js-yaml';
import type { KubeConnection } from './in-cluster';
import { InClusterConnection } from './in-cluster';
import { ClusterConnection, tokenFromFile, type ClusterAccess } from './cluster-connection';

/**
 * The part of a kubeconfig the functions use: the current context's cluster (server, CA, TLS
 * verification) and user (bearer token or token file, client certificate). Exec plugins and
 * auth providers are refused by name: a Lambda has no `aws` or `gcloud` binary to run, and
 * client-node, which ran them, is no longer in the bundle.
 */
export function kubeconfigAccess(text: string, baseDir?: string): ClusterAccess {
  const document: unknown = load(text);
  if (!isRecord(document)) throw new Error('not a kubeconfig: the document is not a mapping');
  const contextName = document['current-context'];
  const contexts = named(document.contexts, 'context');
  const hasCurrent = typeof contextName === 'string' && contextName !== '';
  // Without current-context, only a kubeconfig of one context is unambiguous: picking the first
  // of several could point the controller at another cluster.
  if (!hasCurrent && contexts.size > 1) {
    throw new Error(
      `the kubeconfig has ${contexts.size} contexts and no current-context: set current-context`,
    );
  }
  const context = hasCurrent ? contexts.get(contextName) : contexts.values().next().value;
  if (context === undefined)
    throw new Error('not a kubeconfig: the current context is not defined');
  const cluster = named(document.clusters, 'cluster').get(String(context.cluster));
  if (cluster === undefined || typeof cluster.server !== 'string') {
    throw new Error("not a kubeconfig: the current context's cluster has no server");
  }
  const users = named(document.users, 'user');
  const userName = context.user;
  // A context naming a user that is not there would otherwise send anonymous requests.
  if (typeof userName === 'string' && userName !== '' && !users.has(userName)) {
    throw new Error(`not a kubeconfig: the current context's user ${userName} is not defined`);
  }
  const user = users.get(String(userName)) ?? {};
  if (user.exec !== undefined || user['auth-provider'] !== undefined) {
    throw new Error(
      "the kubeconfig's user runs an exec plugin or auth provider, which the functions cannot: give it a token or a client certificate",
    );
  }
  // Relative paths in a kubeconfig are relative to the file, as kubectl reads them.
  const file = (path: unknown) => {
    if (typeof path !== 'string' || path === '') return undefined;
    return baseDir !== undefined && !isAbsolute(path) ? join(baseDir, path) : path;
  };
  const material = (dataKey: string, fileKey: string, from: Record<string, unknown>) => {
    const data = from[dataKey];
    if (typeof data === 'string' && data !== '') return Buffer.from(data, 'base64').toString();
    const path = file(from[fileKey]);
    return path === undefined ? undefined : readFileSync(path, 'utf8');
  };
  const token = typeof user.token === 'string' && user.token !== '' ? user.token : undefined;
  const tokenFile = file(user.tokenFile);
  return {
    server: cluster.server,
    ca: material('certificate-authority-data', 'certificate-authority', cluster),
    cert: material('client-certificate-data', 'client-certificate', user),
    key: material('client-key-data', 'client-key', user),
    insecureSkipTlsVerify: cluster['insecure-skip-tls-verify'] === true,
    token:
      token !== undefined
        ? () => token
        : tokenFile !== undefined
          ? tokenFromFile(tokenFile)
          : undefined,
  };
}

/**
 * As client-node's `loadFromDefault`: the file named by $KUBECONFIG (its first entry), else
 * ~/.kube/config, else the Pod's ServiceAccount when running in a cluster.
 */
export function defaultConnection(
  env: Readonly<Record<string, string | undefined>>,
): KubeConnection {
  const fromEnv = env.KUBECONFIG?.split(process.platform === 'win32' ? ';' : ':').find(Boolean);
  const home = join(homedir(), '.kube', 'config');
  const path = fromEnv ?? (existsSync(home) ? home : undefined);
  if (path === undefined) return new InClusterConnection(env);
  return kubeconfigFileConnection(path);
}

export function kubeconfigFileConnection(path: string): ClusterConnection {
  return new ClusterConnection(kubeconfigAccess(readFileSync(path, 'utf8'), dirname(path)));
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A kubeconfig list (`- name: x, <field>: {...}`) by name. */
function named(list: unknown, field: string): Map<string, Record<string, unknown>> {
  const entries = new Map<string, Record<string, unknown>>();
  if (!Array.isArray(list)) return entries;
  for (const item of list) {
    if (!isRecord(item) || typeof item.name !== 'string') continue;
    const value = item[field];
    entries.set(item.name, isRecord(value) ? value : {});
  }
  return entries;
}
