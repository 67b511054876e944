import { build, type Metafile } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { esbuildOptionsFor } from '../../infra/lambda-bundling';
import { inlineSchemaKeys, schemaModulePattern } from '../../infra/sdk-schema-keys';

const built = new Map<string, Promise<Metafile>>();

/** Builds a handler as the stack does, to memory (once per file), and returns what esbuild put in it. */
function bundleOf(name: string): Promise<Metafile> {
  let meta = built.get(name);
  if (meta === undefined) {
    meta = build({
      ...esbuildOptionsFor(`functions/${name}/handler.ts`, `bundles/${name}`),
      write: false,
      metafile: true,
      logLevel: 'error',
    }).then((result) => result.metafile);
    built.set(name, meta);
  }
  return meta;
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

  it.each(['service-sync', 'node-sync', 'sweep'])(
    '%s keeps only the EC2 schemas of the operations it calls',
    async (name) => {
      const meta = await bundleOf(name);
      // Of the EC2 client's 1.3 MB of schemas only the shapes of the operations we call are left
      // (it was 550 KiB while esbuild kept every schema with a computed key).
      const ec2Bytes = Object.values(meta.outputs)
        .flatMap((output) => Object.entries(output.inputs))
        .filter(([path]) => path.includes('@aws-sdk/client-ec2/'))
        .reduce((total, [, input]) => total + input.bytesInOutput, 0);
      expect(ec2Bytes).toBeLessThan(60 * 1024);
    },
    60_000,
  );

  it('splits each function into index.mjs and chunks that only dynamic imports reach', async () => {
    const meta = await bundleOf('service-sync');
    const files = Object.keys(meta.outputs);
    expect(files.filter((file) => file.endsWith('.mjs') && !file.includes('/chunks/'))).toEqual([
      'bundles/service-sync/index.mjs',
    ]);
    const eksChunk = files.find((file) =>
      Object.keys(meta.outputs[file]?.inputs ?? {}).some((input) =>
        input.includes('@aws-sdk/client-eks/'),
      ),
    );
    expect(eksChunk).toMatch(/^bundles\/service-sync\/chunks\//);
    const staticImports = meta.outputs['bundles/service-sync/index.mjs']?.imports ?? [];
    expect(staticImports.filter((i) => i.path === eksChunk)).toEqual([
      expect.objectContaining({ kind: 'dynamic-import' }),
    ]);
  }, 60_000);

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

describe('SDK schema modules made tree-shakable (infra/sdk-schema-keys.ts)', () => {
  it('writes a computed key of a string constant as that string, and leaves other keys alone', () => {
    const source = [
      'const _xN = "xmlName";',
      'const _eQN = "ec2QueryName";',
      'let dynamic = "x";',
      'export var A$ = [3, n0, _A, 0, [_B], [[0, { [_eQN]: `B`, [_xN]: _b }]]];',
      'export var C$ = { [dynamic]: 1, [_unknown]: 2, [_xN]: 3 };',
    ].join('\n');
    expect(inlineSchemaKeys(source).split('\n').slice(3)).toEqual([
      'export var A$ = [3, n0, _A, 0, [_B], [[0, { "ec2QueryName": `B`, "xmlName": _b }]]];',
      'export var C$ = { [dynamic]: 1, [_unknown]: 2, "xmlName": 3 };',
    ]);
  });

  it('applies to the generated schema modules of SDK clients and nested clients only', () => {
    const paths = [
      '/p/node_modules/@aws-sdk/client-ec2/dist-es/schemas/schemas_0.js',
      '/p/node_modules/@aws-sdk/nested-clients/dist-es/submodules/sts/schemas/schemas_0.js',
      '/p/node_modules/@aws-sdk/client-ec2/dist-cjs/schemas/schemas_0.js',
      '/p/functions/aws/schemas/schemas_0.js',
    ];
    expect(paths.map((path) => schemaModulePattern.test(path))).toEqual([true, true, false, false]);
  });
});
