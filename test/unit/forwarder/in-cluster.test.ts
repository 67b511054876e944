import { mkdtempSync, writeFileSync } from 'node:fs';
import type https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { InClusterConnection } from '../../../functions/kube/in-cluster';

function serviceAccount(token: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'sa-'));
  writeFileSync(join(dir, 'token'), `${token}\n`);
  writeFileSync(join(dir, 'ca.crt'), '-----BEGIN CERTIFICATE-----\n');
  return dir;
}

describe('InClusterConnection (the Pod’s ServiceAccount)', () => {
  it('outside a Pod, refuses to start and says what is missing and what to use instead', () => {
    expect(() => new InClusterConnection({})).toThrow(
      /KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set.*--kubeconfig/,
    );
  });

  it('speaks HTTPS to the service address, with brackets around an IPv6 host', () => {
    const env = { KUBERNETES_SERVICE_PORT: '443' };
    expect(
      new InClusterConnection({ ...env, KUBERNETES_SERVICE_HOST: '10.100.0.1' }).getCurrentCluster()
        .server,
    ).toBe('https://10.100.0.1:443');
    expect(
      new InClusterConnection({ ...env, KUBERNETES_SERVICE_HOST: 'fd00::1' }).getCurrentCluster()
        .server,
    ).toBe('https://[fd00::1]:443');
  });

  it('sends the token as it is on disk at each request, trusting the mounted CA', async () => {
    const dir = serviceAccount('first');
    const connection = new InClusterConnection({
      KUBERNETES_SERVICE_HOST: '10.100.0.1',
      KUBERNETES_SERVICE_PORT: '443',
      KUBERNETES_SERVICE_ACCOUNT_DIR: dir,
    });
    const options: https.RequestOptions = { headers: { Accept: 'application/json' } };
    await connection.applyToHTTPSOptions(options);
    expect(options.headers).toEqual({ Accept: 'application/json', Authorization: 'Bearer first' });
    expect(options.ca).toBe('-----BEGIN CERTIFICATE-----\n');
    writeFileSync(join(dir, 'token'), 'renewed\n');
    const next: https.RequestOptions = {};
    await connection.applyToHTTPSOptions(next);
    expect(next.headers).toEqual({ Authorization: 'Bearer renewed' });
    // One agent while the CA is the same: connections are kept across requests.
    expect(next.agent).toBe(options.agent);
  });
});
