import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * What a Pod sees of its cluster, on loopback: an HTTPS API server (a TLS front that checks the
 * bearer token and passes requests on to the fake API server over HTTP) and a ServiceAccount
 * directory holding that token and the front's CA, as Kubernetes mounts them. The certificate is
 * made with the openssl command for each front, valid for 127.0.0.1 only.
 */
export interface InClusterFront {
  /** The environment a Pod gets: KUBERNETES_SERVICE_HOST/PORT and where the token and CA are. */
  readonly env: Record<string, string>;
  readonly serviceAccountDir: string;
  /** Requests refused for a missing or wrong token. */
  readonly refused: number;
  /** Replaces the token file, as the kubelet does when it renews a projected token. */
  rotateToken(token: string): void;
  close(): Promise<void>;
}

export interface InClusterFrontOptions {
  /**
   * The token to pass on upstream instead of the Pod's: the identity the API server would
   * authenticate the ServiceAccount token as (`FakeKubeApiServer.tokenFor`), so an upstream that
   * enforces RBAC sees the ServiceAccount. Without it the Pod's token is passed on as it is.
   */
  readonly upstreamToken?: string;
}

export async function startInClusterFront(
  upstream: string,
  options: InClusterFrontOptions = {},
): Promise<InClusterFront> {
  const dir = mkdtempSync(join(tmpdir(), 'in-cluster-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'ca.crt'),
      '-days',
      '1',
      '-subj',
      '/CN=kubernetes',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  let token = 'token-1';
  writeFileSync(join(dir, 'token'), `${token}\n`);
  let refused = 0;
  const server: Server = createServer(
    { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'ca.crt')) },
    (req, res) => {
      if (req.headers.authorization !== `Bearer ${token}`) {
        refused++;
        res.writeHead(401, { 'Content-Type': 'application/json' }).end('{"kind":"Status"}');
        return;
      }
      const headers =
        options.upstreamToken === undefined
          ? req.headers
          : { ...req.headers, authorization: `Bearer ${options.upstreamToken}` };
      const upstreamRequest = request(
        `${upstream}${req.url ?? '/'}`,
        { method: req.method, headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstreamRequest.on('error', () => res.destroy());
      req.pipe(upstreamRequest);
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    env: {
      KUBERNETES_SERVICE_HOST: '127.0.0.1',
      KUBERNETES_SERVICE_PORT: String(port),
      KUBERNETES_SERVICE_ACCOUNT_DIR: dir,
    },
    serviceAccountDir: dir,
    get refused() {
      return refused;
    },
    rotateToken(next: string) {
      token = next;
      writeFileSync(join(dir, 'token'), `${next}\n`);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
