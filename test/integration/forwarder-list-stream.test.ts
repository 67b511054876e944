import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { Forwarder } from '../../functions/forwarder/forwarder';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import type { WorkMessage } from '../../functions/contract/work-messages';
import { loadBalancerService } from '../support/kube-objects';

/**
 * A proxy in front of the fake API server that passes every request on, but sends the Service
 * list's body only up to `holdAt` and the rest once `release` is called: a page that is still
 * arriving, as a large page over a slow link is.
 */
interface HoldingProxy {
  readonly url: string;
  holdAt: string;
  /** Whether the held part of a list body has been sent. */
  readonly released: boolean;
  release(): void;
  close(): Promise<void>;
}

async function startHoldingProxy(upstream: string): Promise<HoldingProxy> {
  let releaseHeld: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (releaseHeld = resolve));
  let released = false;
  const open = new Set<IncomingMessage>();
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', upstream);
    const out = request(url, { method: req.method, headers: req.headers }, (answer) => {
      open.add(answer);
      const isServiceList =
        url.pathname === '/api/v1/services' && url.searchParams.get('watch') !== 'true';
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      if (!isServiceList) {
        answer.pipe(res);
        return;
      }
      const chunks: Buffer[] = [];
      answer.on('data', (chunk: Buffer) => chunks.push(chunk));
      answer.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const cut = body.indexOf(proxy.holdAt);
        res.write(body.slice(0, cut));
        void held.then(() => res.end(body.slice(cut)));
      });
    });
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxy: HoldingProxy = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    holdAt: '',
    get released() {
      return released;
    },
    release() {
      released = true;
      releaseHeld();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const answer of open) answer.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return proxy;
}

let kube: FakeKubeApiServer;
let proxy: HoldingProxy;
let forwarder: Forwarder | undefined;

beforeEach(async () => {
  kube = await FakeKubeApiServer.start();
  proxy = await startHoldingProxy(kube.url);
});

afterEach(async () => {
  proxy.release();
  await forwarder?.stop(1000);
  await proxy.close();
  await kube.stop();
});

it('forwards a list page’s Services while the page is still arriving: a page is never held whole', async () => {
  kube.store.create('services', 'team-a', loadBalancerService('first') as never);
  kube.store.create('services', 'team-b', loadBalancerService('second') as never);
  // Everything before the second Service's name reaches the forwarder; the rest waits.
  proxy.holdAt = '"second"';
  const sent: { key: string; released: boolean }[] = [];
  const base = kube.kubeConfig();
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'proxy', server: proxy.url, skipTLSVerify: true }],
    users: [{ name: 'u', token: base.getCurrentUser()?.token ?? '' }],
    contexts: [{ name: 'c', cluster: 'proxy', user: 'u' }],
    currentContext: 'c',
  });
  forwarder = new Forwarder({
    kubeConfig,
    claim: { loadBalancerClass: 'x.io/nlb', claimClassless: true },
    nodePolicy: 'stable',
    send: (messages: WorkMessage[]) => {
      for (const m of messages) {
        if (m.kind === 'service') sent.push({ key: m.key, released: proxy.released });
      }
      return Promise.resolve();
    },
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 200))),
  });
  forwarder.start();
  try {
    await vi.waitFor(() => expect(sent.map((s) => s.key)).toContain('team-a/first'), {
      timeout: 5_000,
    });
  } finally {
    proxy.release();
  }
  await vi.waitFor(() => expect(forwarder?.ready).toBe(true));
  await vi.waitFor(() =>
    expect(sent).toEqual([
      { key: 'team-a/first', released: false },
      { key: 'team-b/second', released: true },
    ]),
  );
});
