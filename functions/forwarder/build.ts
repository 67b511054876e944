import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { packageRoot } from '../package/package-root';
import { runAsScript } from '../package/run-as-script';

/**
 * Bundles the forwarder into one ESM file (production code only). It runs from a ConfigMap on a
 * public Node image (infra/k8s), so it must stay well under a ConfigMap's 1 MiB: that is why the
 * forwarder reaches the API server without client-node (functions/kube/in-cluster.ts). Names
 * are kept, so stack traces read without a source map. The banner gives CommonJS dependencies the
 * `require` they expect inside an ES module. Paths are the package's, not the working directory's:
 * `k8s render` runs this from wherever the user is, in a checkout or an installed package.
 */
export async function buildForwarder(outfile: string): Promise<void> {
  const root = packageRoot();
  await build({
    absWorkingDir: root,
    entryPoints: [join(root, 'functions/forwarder/main.ts')],
    outfile: resolve(outfile),
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'esm',
    minify: true,
    keepNames: true,
    legalComments: 'none',
    banner: {
      js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
    },
    logLevel: 'warning',
  });
}

/** A ConfigMap holds at most 1 MiB; the bundle keeps room for the object's other fields. */
export const forwarderBundleLimitBytes = 900 * 1024;

if (runAsScript(import.meta.url)) {
  await buildForwarder(process.argv[2] ?? 'infra/k8s/code/forwarder.mjs');
}
