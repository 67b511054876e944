import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createPlainServer, type RequestListener } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { parseConfig } from '../../functions/contract/controller-config';
import { RetryableError } from '../../functions/core/errors';
import { kubernetesConnector, requestDeadlineMs } from '../../functions/kube/connect';
import { syncTimeoutSeconds } from '../../infra/controller-config';
import { kubeconfigFileConnection } from '../../functions/kube/kubeconfig';
import { ClusterConnection } from '../../functions/kube/cluster-connection';
import { readWatchStream } from '../../functions/forwarder/watch-stream';
import { KubeApiClient, KubeApiError } from '../../functions/kube/kube-api-client';
import { HttpKubernetesApi } from '../../functions/kube/kubernetes-api';

/**
 * The functions' own HTTPS client against a real TLS API server stand-in: the cluster CA is what
 * makes the server trusted, the bearer token is sent and refreshed, and connections are kept
 * alive. The fake API server speaks plain HTTP, so this one serves a node list over TLS.
 */
let dir: string;
let server: Server;
let url: string;
let caPem: string;
const seen: { authorization: string | undefined; socket: number }[] = [];
const sockets = new Map<Socket, number>();

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kube-https-'));
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=test-ca',
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
  );
  openssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    '/CN=kube-apiserver',
    '-keyout',
    'server.key',
    '-out',
    'server.csr',
  );
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  openssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    'san.ext',
    '-out',
    'server.crt',
  );
  caPem = readFileSync(join(dir, 'ca.crt'), 'utf8');
  server = createServer(
    { key: readFileSync(join(dir, 'server.key')), cert: readFileSync(join(dir, 'server.crt')) },
    (req, res) => {
      const socket = req.socket;
      if (!sockets.has(socket)) sockets.set(socket, sockets.size + 1);
      seen.push({ authorization: req.headers.authorization, socket: sockets.get(socket) ?? 0 });
      res.setHeader('Content-Type', 'application/json');
      res.end(
        JSON.stringify({
          kind: 'NodeList',
          items: [{ metadata: { name: 'node-a' } }],
          metadata: {},
        }),
      );
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

afterEach(() => {
  seen.length = 0;
  vi.unstubAllEnvs();
});

function eksConfig(caData: string) {
  return parseConfig({
    clusterName: 'test',
    region: 'us-east-1',
    queueUrl: 'http://127.0.0.1:1/000000000000/work',
    tableName: 'state',
    aws: { vpcId: 'vpc-0123456789abcdef0' },
    kubernetes: {
      mode: 'eks',
      clusterName: 'test',
      endpoint: url,
      certificateAuthorityData: caData,
    },
  });
}

describe('the functions Kubernetes client over HTTPS', () => {
  it('eks mode: trusts the cluster CA, sends a minted token, re-mints it after ten minutes on the same connection', async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIDEXAMPLE');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'secret');
    let now = Date.parse('2026-12-01T12:00:00Z');
    const clock = { now: () => new Date(now) };
    const connect = kubernetesConnector(eksConfig(Buffer.from(caPem).toString('base64')), clock);
    const kube = new HttpKubernetesApi(connect);

    expect((await kube.listNodes()).map((n) => n.metadata?.name)).toEqual(['node-a']);
    now += 9 * 60 * 1000;
    await kube.listNodes();
    now += 2 * 60 * 1000;
    await kube.listNodes();

    const tokens = seen.map((s) => s.authorization);
    expect(tokens.every((t) => t?.startsWith('Bearer k8s-aws-v1.'))).toBe(true);
    expect(tokens[1]).toBe(tokens[0]);
    expect(tokens[2]).not.toBe(tokens[0]);
    expect(new Set(seen.map((s) => s.socket)).size).toBe(1);
  });

  it('eks mode: refuses a server its CA did not sign, as a retryable error', async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIDEXAMPLE');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'secret');
    const otherCa = readFileSync(join(dir, 'server.crt'), 'utf8');
    const clock = { now: () => new Date() };
    const kube = new HttpKubernetesApi(
      kubernetesConnector(eksConfig(Buffer.from(otherCa).toString('base64')), clock),
    );
    const error = await kube.listNodes().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as Error).message).toMatch(/^list nodes: .*certificate/);
    expect(seen).toEqual([]);
  });

  it('kubeconfig file: CA and token files relative to it, the token read again on each request', async () => {
    writeFileSync(join(dir, 'token'), 'first-token\n');
    writeFileSync(
      join(dir, 'kubeconfig'),
      [
        'apiVersion: v1',
        'clusters:',
        '- name: c',
        `  cluster: {server: "${url}", certificate-authority: ca.crt}`,
        'users:',
        '- name: u',
        '  user: {tokenFile: token}',
        'contexts:',
        '- name: x',
        '  context: {cluster: c, user: u}',
        'current-context: x',
      ].join('\n'),
    );
    const client = new KubeApiClient(kubeconfigFileConnection(join(dir, 'kubeconfig')));
    const kube = new HttpKubernetesApi(() => Promise.resolve(client));
    await kube.listNodes();
    writeFileSync(join(dir, 'token'), 'rotated-token\n');
    await kube.listNodes();
    expect(seen.map((s) => s.authorization)).toEqual([
      'Bearer first-token',
      'Bearer rotated-token',
    ]);
    client.close();
  });
});

describe('insecure connections', () => {
  const clock = { now: () => new Date() };

  function kubeconfigText(cluster: Record<string, unknown>): string {
    return JSON.stringify({
      apiVersion: 'v1',
      clusters: [{ name: 'c', cluster }],
      users: [{ name: 'u', user: { token: 'kubeconfig-token' } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    });
  }

  function kubeconfigFile(cluster: Record<string, unknown>): string {
    const path = join(dir, `insecure-${Math.random().toString(36).slice(2)}`);
    writeFileSync(path, kubeconfigText(cluster));
    return path;
  }

  function configWith(kubernetes: Record<string, unknown>) {
    return parseConfig({
      clusterName: 'test',
      region: 'us-east-1',
      queueUrl: 'http://127.0.0.1:1/000000000000/work',
      tableName: 'state',
      aws: {
        vpcId: 'vpc-0123456789abcdef0',
        endpoints: { secretsManager: inject('awsEndpoint') },
      },
      kubernetes,
    });
  }

  /** A kubeconfig in moto's Secrets Manager, read by the connector as in Lambda. */
  async function secretWith(text: string): Promise<string> {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'testing');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'testing');
    vi.stubEnv('AWS_SESSION_TOKEN', undefined);
    const secrets = new SecretsManagerClient({
      endpoint: inject('awsEndpoint'),
      region: 'us-east-1',
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    });
    const created = await secrets.send(
      new CreateSecretCommand({ Name: `kubeconfig-${randomUUID()}`, SecretString: text }),
    );
    return created.ARN ?? '';
  }

  it('secret mode: insecure-skip-tls-verify is refused before any request carries the token', async () => {
    const secretArn = await secretWith(
      kubeconfigText({ server: url, 'insecure-skip-tls-verify': true }),
    );
    const kube = new HttpKubernetesApi(
      kubernetesConnector(configWith({ mode: 'secret', secretArn }), clock),
    );
    const error = await kube.listNodes().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetryableError);
    const message = (error as Error).message;
    expect(message).toContain(`secret ${secretArn} is refused`);
    expect(message).toContain("insecure-skip-tls-verify is set: the server's certificate");
    expect(message).toContain('kubernetesAllowInsecureConnection');
    expect(seen).toEqual([]);
  });

  it('secret mode with allowInsecureConnection: insecure-skip-tls-verify works over TLS and logs a Warning', async () => {
    const secretArn = await secretWith(
      kubeconfigText({ server: url, 'insecure-skip-tls-verify': true }),
    );
    const warnings: { message: string; fields?: Record<string, unknown> }[] = [];
    const connect = kubernetesConnector(
      configWith({ mode: 'secret', secretArn, allowInsecureConnection: true }),
      clock,
      { log: { warn: (message, fields) => warnings.push({ message, fields }) } },
    );
    const kube = new HttpKubernetesApi(connect);
    // No CA in the kubeconfig: without the setting this certificate would be refused.
    expect((await kube.listNodes()).map((n) => n.metadata?.name)).toEqual(['node-a']);
    expect(seen.map((s) => s.authorization)).toEqual(['Bearer kubeconfig-token']);
    expect(warnings).toEqual([
      {
        message: 'insecure Kubernetes API connection accepted (allowInsecureConnection)',
        fields: {
          secretArn,
          server: url,
          problems: [expect.stringContaining('insecure-skip-tls-verify is set') as unknown],
        },
      },
    ]);
    (await connect()).close();
  });

  it('kubeconfig mode: plain HTTP to another host is refused; a server on this machine is accepted as is', async () => {
    const remote = kubeconfigFile({ server: 'http://192.0.2.10:8080' });
    const error = await kubernetesConnector(
      configWith({ mode: 'kubeconfig', path: remote }),
      clock,
    )().catch((e: unknown) => e);
    expect((error as Error).message).toMatch(
      /is refused: the server http:\/\/192\.0\.2\.10:8080 is plain HTTP: the bearer token/,
    );
    const remoteTls = kubeconfigFile({
      server: 'https://192.0.2.10:6443',
      'insecure-skip-tls-verify': true,
    });
    await expect(
      kubernetesConnector(configWith({ mode: 'kubeconfig', path: remoteTls }), clock)(),
    ).rejects.toThrow(/is refused: insecure-skip-tls-verify is set/);

    const plain = createPlainServer((_req, res) => {
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ items: [{ metadata: { name: 'local' } }], metadata: {} }));
    });
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    const warnings: string[] = [];
    const log = { warn: (message: string) => warnings.push(message) };
    for (const [path, node] of [
      // What the embedded fake API server's kubeconfig says.
      [
        kubeconfigFile({
          server: `http://127.0.0.1:${(plain.address() as AddressInfo).port}`,
          'insecure-skip-tls-verify': true,
        }),
        'local',
      ],
      [kubeconfigFile({ server: url, 'insecure-skip-tls-verify': true }), 'node-a'],
    ] as const) {
      const connect = kubernetesConnector(configWith({ mode: 'kubeconfig', path }), clock, { log });
      const kube = new HttpKubernetesApi(connect);
      expect((await kube.listNodes()).map((n) => n.metadata?.name)).toEqual([node]);
      (await connect()).close();
    }
    expect(warnings).toEqual([]);
    plain.closeAllConnections();
    await new Promise<void>((resolve) => plain.close(() => resolve()));
  });
});

describe('a Kubernetes API server that trickles its answer', () => {
  it('is cut off at the total bound of a request, not only after an idle spell', async () => {
    // A byte every 50 ms: the 30 s idle timeout never fires, and the answer never ends.
    const trickle = createPlainServer((req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write('{"items":[');
      const timer = setInterval(() => res.write(' '), 50);
      req.socket.on('close', () => clearInterval(timer));
    });
    await new Promise<void>((resolve) => trickle.listen(0, '127.0.0.1', resolve));
    const path = join(dir, 'trickle-kubeconfig');
    writeFileSync(
      path,
      JSON.stringify({
        apiVersion: 'v1',
        clusters: [
          {
            name: 'c',
            cluster: { server: `http://127.0.0.1:${(trickle.address() as AddressInfo).port}` },
          },
        ],
        users: [{ name: 'u', user: { token: 't' } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      }),
    );
    const config = parseConfig({
      clusterName: 'test',
      region: 'us-east-1',
      queueUrl: 'http://127.0.0.1:1/000000000000/work',
      tableName: 'state',
      aws: { vpcId: 'vpc-0123456789abcdef0' },
      kubernetes: { mode: 'kubeconfig', path },
    });
    const connect = kubernetesConnector(
      config,
      { now: () => new Date() },
      { requestDeadlineMs: 400 },
    );
    const kube = new HttpKubernetesApi(connect);
    const started = Date.now();
    const error = await kube.listNodes().catch((e: unknown) => e);
    const elapsed = Date.now() - started;
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as Error).message).toMatch(/^list nodes: .*aborted/);
    expect(elapsed).toBeGreaterThanOrEqual(350);
    expect(elapsed).toBeLessThan(3000);
    (await connect()).close();
    trickle.closeAllConnections();
    await new Promise<void>((resolve) => trickle.close(() => resolve()));
  });

  it('the functions bound every request to 40 s whole, inside their 60 s timeout', () => {
    expect(requestDeadlineMs).toBe(40_000);
    expect(requestDeadlineMs).toBeLessThan(syncTimeoutSeconds * 1000);
  });
});

describe('a Kubernetes API server that stops answering', () => {
  it('gives up after the client timeout with a retryable error, not at the function timeout', async () => {
    const { createServer: createHttpServer } = await import('node:http');
    // Accepts the request and never answers, as a dead kept-alive socket would look.
    const silent = createHttpServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as AddressInfo).port;
    const client = new KubeApiClient(
      new ClusterConnection({ server: `http://127.0.0.1:${port}` }),
      200,
    );
    const kube = new HttpKubernetesApi(() => Promise.resolve(client));
    const error = await kube.listNodes().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetryableError);
    expect(String((error as Error).message)).toContain('no answer within 200 ms');
    client.close();
    silent.closeAllConnections();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });
});

describe('streamed reads (the forwarder’s list pages and watches) on the same client', () => {
  async function plainServer(
    handler: RequestListener,
  ): Promise<{ client: KubeApiClient; close: () => Promise<void> }> {
    const plain = createPlainServer(handler);
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    const port = (plain.address() as AddressInfo).port;
    // The request timeout is short on purpose: a streamed read must not be bound by it.
    const client = new KubeApiClient(
      new ClusterConnection({ server: `http://127.0.0.1:${port}` }),
      100,
    );
    return {
      client,
      close: async () => {
        client.close();
        plain.closeAllConnections();
        await new Promise<void>((resolve) => plain.close(() => resolve()));
      },
    };
  }

  it('a watch silent for longer than the request timeout is not cut: its later events arrive', async () => {
    const { client, close } = await plainServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write('{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n');
      setTimeout(() => res.end('{"type":"ADDED","object":{"metadata":{"name":"b"}}}\n'), 400);
    });
    const response = await client.stream('/api/v1/services', { watch: 'true' });
    const names: unknown[] = [];
    await readWatchStream(response, (_type, object) =>
      names.push((object as { metadata: { name: string } }).metadata.name),
    );
    expect(names).toEqual(['a', 'b']);
    await close();
  });

  it('a refused read rejects with the status and body, as a watch’s 410 Gone re-list needs', async () => {
    const { client, close } = await plainServer((_req, res) => {
      res.writeHead(410, { 'Content-Type': 'application/json' });
      res.end('{"kind":"Status","code":410,"reason":"Expired"}');
    });
    const error = await client
      .stream('/api/v1/services', { watch: 'true', resourceVersion: '7' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KubeApiError);
    expect((error as KubeApiError).code).toBe(410);
    expect((error as KubeApiError).body).toContain('"reason":"Expired"');
    expect((error as KubeApiError).message).toMatch(/^GET \/api\/v1\/services: 410 /);
    await close();
  });
});
