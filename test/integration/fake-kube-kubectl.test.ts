import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;
// CI installs kubectl (.ci/run) and sets this, so a missing kubectl fails there instead of skipping.
if (process.env.REQUIRE_KUBECTL === '1' && !hasKubectl) {
  throw new Error('REQUIRE_KUBECTL is set but kubectl is not on PATH');
}

/** `npm start` prints the simulated cluster's kubeconfig for kubectl; this is what kubectl can do with it. */
describe.skipIf(!hasKubectl)(
  'kubectl against the fake API server (skipped without kubectl)',
  () => {
    let kube: FakeKubeApiServer;
    let kubeconfig: string;
    const dir = mkdtempSync(join(tmpdir(), 'kubectl-'));
    // Asynchronous: the fake API server answers from this same process.
    const kubectl = (...args: string[]) =>
      new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
        execFile('kubectl', ['--kubeconfig', kubeconfig, ...args], (error, stdout, stderr) =>
          resolve({ status: error ? 1 : 0, stdout, stderr }),
        );
      });

    beforeAll(async () => {
      kube = await FakeKubeApiServer.start();
      kubeconfig = join(dir, 'kubeconfig');
      writeFileSync(kubeconfig, kube.kubeconfigText());
      kube.store.create('nodes', '', { metadata: { name: 'node-1' }, spec: {} });
    });
    afterAll(() => kube.stop());

    it('gets, creates, patches and deletes Services, and lists nodes', async () => {
      const file = join(dir, 'web.json');
      writeFileSync(
        file,
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: 'web', namespace: 'default' },
          spec: { type: 'LoadBalancer', ports: [{ port: 80 }] },
        }),
      );
      // No OpenAPI document is served, so client-side validation is off.
      const created = await kubectl('create', '--validate=false', '-f', file);
      expect(created.stdout, created.stderr).toContain('service/web created');
      expect((await kubectl('get', 'svc', '-A')).stdout).toMatch(/default +web/);
      expect((await kubectl('get', 'nodes')).stdout).toContain('node-1');
      const labels = '{"metadata":{"labels":{"team":"a"}}}';
      const patched = await kubectl('patch', 'service', 'web', '--type', 'merge', '-p', labels);
      expect(patched.status, patched.stderr).toBe(0);
      expect(JSON.stringify(kube.store.get('services', 'default', 'web'))).toContain('"team":"a"');
      expect((await kubectl('delete', 'service', 'web')).stdout).toContain('deleted');
      expect(kube.store.list('services')).toEqual([]);
    });
  },
);
