import { build } from 'esbuild';

/**
 * Bundles the forwarder into one ESM file for its container image (production code only). The
 * banner gives CommonJS dependencies the `require` they expect inside an ES module.
 */
export async function buildForwarder(outfile: string): Promise<void> {
  await build({
    entryPoints: ['functions/forwarder/main.ts'],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'esm',
    minify: true,
    sourcemap: true,
    legalComments: 'none',
    banner: {
      js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
    },
    logLevel: 'warning',
  });
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  await buildForwarder(process.argv[2] ?? 'dist/forwarder/main.mjs');
}
