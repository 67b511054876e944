import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { cli } from '../support/cli-process';

/**
 * `npm start -- --tenant-policy FILE`: the local mode takes the same setting as a deployment, in a
 * child process as users run it, against the test run's moto (default account, own names).
 */
const endpoint = inject('awsEndpoint');

function policyFile(policy: unknown): string {
  const path = join(mkdtempSync(join(tmpdir(), 'ssc-policy-')), 'tenant-policy.json');
  writeFileSync(path, JSON.stringify(policy));
  return path;
}

describe('npm start -- --tenant-policy', () => {
  it('refuses a bad policy file before starting anything, naming the setting', async () => {
    const path = policyFile({ rules: [{ namespaces: ['team-*'], internetFacng: false }] });
    const result = await cli(['--tenant-policy', path]);
    expect(result.code).toBe(2);
    expect(result.output).toContain('tenantPolicy.rules.0: Unrecognized key: "internetFacng"');
    expect(result.output).not.toContain('Starting the embedded default');
  });

  it('runs the embedded default under a policy, reading labels and counting Services within the RBAC of infra/k8s', async () => {
    const clusterName = `policy-${Date.now().toString(36)}`;
    const path = policyFile({
      rules: [
        { namespaceSelector: { matchLabels: { exposure: 'private' } }, internetFacing: false },
      ],
      default: { internetFacing: false, maxLoadBalancerServices: 1 },
    });
    const result = await cli(['--rbac', '--until-converged', '--timeout', '120'], {
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
      AWS_REGION: 'us-east-1',
      SSC_CLUSTER_NAME: clusterName,
      SSC_QUEUE_NAME: `${clusterName}-work`,
      SSC_TABLE_NAME: `${clusterName}-state`,
      SSC_TENANT_POLICY: path,
    });
    expect(result.code, result.output).toBe(0);
    expect(result.output).toMatch(/default\/hello +ready +3 /);
    expect(result.output).not.toContain('rbac: refused');
  }, 150_000);
});
