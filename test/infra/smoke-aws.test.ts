import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/** Runs `npm run smoke:aws`'s script with an environment that has no AWS account in it. */
function smoke(extra: Record<string, string>) {
  const home = mkdtempSync(join(tmpdir(), 'no-aws-'));
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: home,
    AWS_CONFIG_FILE: join(home, 'config'),
    AWS_SHARED_CREDENTIALS_FILE: join(home, 'credentials'),
    AWS_EC2_METADATA_DISABLED: 'true',
    ...extra,
  };
  return spawnSync(process.execPath, ['--import', 'tsx', 'infra/smoke-aws.ts'], {
    env,
    encoding: 'utf8',
    timeout: 60_000,
  });
}

describe('npm run smoke:aws', () => {
  it('is skipped with a clear message when the cluster to use is not given', () => {
    const result = smoke({});
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('smoke:aws skipped: set SMOKE_CLUSTER_NAME and SMOKE_VPC_ID');
  });

  it('is skipped with a clear message when no AWS credentials are configured', () => {
    const result = smoke({ SMOKE_CLUSTER_NAME: 'demo', SMOKE_VPC_ID: 'vpc-0123abcd' });
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('smoke:aws skipped: no AWS credentials configured');
  });
});
