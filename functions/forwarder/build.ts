import { build, type Plugin } from 'esbuild';

/**
 * client-node does not declare its modules free of side effects, so a bundler keeps its generated
 * models and API classes for every Kubernetes kind (tens of MiB of resident memory) even when only
 * KubeConfig and Watch are used. They are plain class definitions: say so, and unused ones drop out.
 */
function sideEffectFree(filter: RegExp): Plugin {
  return {
    name: 'side-effect-free',
    setup(build) {
      build.onResolve({ filter: /.*/ }, async (args) => {
        if (args.pluginData === 'resolving') return undefined;
        const result = await build.resolve(args.path, {
          kind: args.kind,
          importer: args.importer,
          resolveDir: args.resolveDir,
          pluginData: 'resolving',
        });
        if (result.errors.length > 0 || !filter.test(result.path)) return undefined;
        return { ...result, sideEffects: false };
      });
    },
  };
}

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
    // Whitespace and syntax only: names survive for readable stack traces without a source map.
    minifyWhitespace: true,
    minifySyntax: true,
    sourcemap: true,
    legalComments: 'none',
    banner: {
      js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
    },
    logLevel: 'warning',
    plugins: [sideEffectFree(/[\\/]node_modules[\\/]@kubernetes[\\/]client-node[\\/]/)],
  });
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  await buildForwarder(process.argv[2] ?? 'dist/forwarder/main.mjs');
}
