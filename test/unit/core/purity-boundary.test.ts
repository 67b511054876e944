import { ESLint, type Linter } from 'eslint';
import tseslint from 'typescript-eslint';
import { describe, expect, it } from 'vitest';
import projectConfig from '../../../eslint.config.js';

/**
 * The project's own boundary rules (taken from eslint.config.js, not copied) applied to probe
 * sources placed in functions/core and functions/sync: this is how the core is kept free of I/O.
 */
const boundaryEntries = (projectConfig as Linter.Config[]).filter((entry) =>
  entry.files?.some(
    (pattern) =>
      pattern === 'functions/core/**/*.ts' ||
      pattern === 'functions/sync/**/*.ts' ||
      pattern === 'functions/nlb/model/**/*.ts',
  ),
);

const eslint = new ESLint({
  overrideConfigFile: true,
  overrideConfig: [
    { files: ['**/*.ts'], languageOptions: { parser: tseslint.parser } },
    ...boundaryEntries,
  ],
});

async function violations(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return (result?.messages ?? []).map((m) => m.message);
}

describe('purity boundary of functions/core and functions/sync', () => {
  it('finds the boundary rules in the project configuration', () => {
    expect(boundaryEntries).toHaveLength(3);
  });

  it.each([
    ["import { readFileSync } from 'node:fs';", 'no Node built-ins'],
    ["import { request } from 'https';", 'no Node built-ins'],
    ["import { ELBv2 } from '@aws-sdk/client-elastic-load-balancing-v2';", 'functions/aws'],
    ["import { CoreV1Api } from '@kubernetes/client-node';", 'functions/kube'],
    ["import { x } from '../aws/provider';", 'imports only from functions/core'],
    ['export const now = Date.now();', 'Inject a clock'],
    ['export const now = new Date();', 'Inject a clock'],
    ['export const r = Math.random();', 'Inject randomness'],
    ['export const region = process.env.AWS_REGION;', 'environment'],
    ["console.log('hi');", 'no I/O'],
  ])('rejects in core: %s', async (code, message) => {
    const messages = await violations('functions/core/probe.ts', code);
    expect(messages.join('\n')).toContain(message);
  });

  it('lets use cases import the core but not adapters', async () => {
    expect(
      await violations('functions/sync/probe.ts', "import { x } from '../core/claim';"),
    ).toEqual([]);
    expect(
      (await violations('functions/sync/probe.ts', "import { x } from '../aws/provider';")).join(),
    ).toContain('only functions/core and functions/sync');
  });

  it('keeps the NLB model pure: it may import the core, not the AWS SDK or the adapters', async () => {
    expect(
      await violations('functions/nlb/model/probe.ts', "import { x } from '../../core/hash';"),
    ).toEqual([]);
    expect(
      (await violations('functions/nlb/model/probe.ts', "import { x } from '../observe';")).join(),
    ).toContain('pure NLB model');
    expect(
      (
        await violations(
          'functions/nlb/model/probe.ts',
          "import { EC2Client } from '@aws-sdk/client-ec2';",
        )
      ).join(),
    ).toContain('functions/aws');
  });

  it('leaves adapters free to do I/O', async () => {
    expect(
      await violations('functions/aws/probe.ts', "import { readFileSync } from 'node:fs';"),
    ).toEqual([]);
  });
});
