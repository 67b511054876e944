import { build, type Metafile } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { esbuildOptionsFor } from '../../infra/lambda-bundling';

/** Builds a handler as the stack does, to memory, and returns what esbuild put in it. */
async function bundleOf(name: string): Promise<Metafile> {
  const result = await build({
    ...esbuildOptionsFor(`functions/${name}/handler.ts`, `${name}.mjs`),
    write: false,
    metafile: true,
    logLevel: 'error',
  });
  return result.metafile;
}

describe('Lambda bundles (issue 21: cold start)', () => {
  it.each(['service-sync', 'node-sync', 'sweep'])(
    '%s carries neither client-node nor its undici fetch stack',
    async (name) => {
      const inputs = Object.keys((await bundleOf(name)).inputs);
      expect(
        inputs.filter((path) => /node_modules\/(@kubernetes\/client-node|undici)\//.test(path)),
      ).toEqual([]);
      // The SDK's ES modules, so unused commands and shapes are left out.
      expect(inputs.some((path) => path.includes('@aws-sdk/client-ec2/dist-cjs/'))).toBe(false);
    },
    60_000,
  );

  it('imports the EKS and Secrets Manager clients only when their mode needs them', async () => {
    const meta = await bundleOf('service-sync');
    const connect = meta.inputs['functions/kube/connect.ts'];
    const kinds: Record<string, string> = Object.fromEntries(
      (connect?.imports ?? [])
        .filter((i) => i.original?.startsWith('@aws-sdk/'))
        .map((i) => [i.original ?? '', i.kind]),
    );
    expect(kinds).toEqual({
      '@aws-sdk/client-eks': 'dynamic-import',
      '@aws-sdk/client-secrets-manager': 'dynamic-import',
      '@aws-sdk/credential-provider-node': 'dynamic-import',
    });
  }, 60_000);
});
