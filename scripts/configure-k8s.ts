import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { buildForwarder } from '../functions/forwarder/build';
import {
  findForwarderOutputs,
  forwarderConfigOf,
  withForwarderImage,
  type StackOutputs,
} from '../functions/local/k8s-render';
import { runAsScript } from '../functions/package/run-as-script';

/**
 * `npm run k8s:configure [-- cdk-outputs.json] [--image REF] [--stack NAME]`: writes what
 * `kubectl apply --server-side -k infra/k8s` needs from the stack's outputs
 * (`npx cdk deploy --outputs-file cdk-outputs.json`): the forwarder's configuration, its bundle
 * (built from this checkout, so it matches the functions just deployed) and, when an image of
 * your own is given or the stack built one, that image. (With IRSA, the ServiceAccount's role
 * annotation is still added by hand from the ForwarderRoleArn output; Pod Identity needs nothing.)
 * It edits this checkout's infra/k8s in place, for one cluster at a time; `serverless-service-
 * controller k8s render` (functions/local/k8s-render.ts, which this shares its matching with)
 * writes a directory per cluster instead, from a checkout or the installed package.
 */
export function configureKustomization(
  outputs: StackOutputs,
  files: { config: string; kustomization: string },
  options: { image?: string | undefined; stack?: string | undefined } = {},
): { stack: string; image?: string } {
  const found = findForwarderOutputs(outputs, { stack: options.stack });
  writeFileSync(files.config, `${JSON.stringify(forwarderConfigOf(found), null, 2)}\n`);
  const image = options.image ?? found.image;
  if (image !== undefined) {
    const text = readFileSync(files.kustomization, 'utf8');
    const updated = withForwarderImage(text, image);
    if (updated === undefined) {
      throw new Error(`no 'images: - name: forwarder' entry to update in ${files.kustomization}`);
    }
    writeFileSync(files.kustomization, updated);
  }
  return { stack: found.stack, ...(image !== undefined ? { image } : {}) };
}

if (runAsScript(import.meta.url)) {
  const { values, positionals } = parseArgs({
    options: { image: { type: 'string' }, stack: { type: 'string' } },
    allowPositionals: true,
  });
  const path = positionals[0] ?? 'cdk-outputs.json';
  const result = configureKustomization(
    JSON.parse(readFileSync(path, 'utf8')) as StackOutputs,
    { config: 'infra/k8s/config/controller.json', kustomization: 'infra/k8s/kustomization.yaml' },
    { image: values.image, stack: values.stack },
  );
  const bundle = 'infra/k8s/code/forwarder.mjs';
  mkdirSync(dirname(bundle), { recursive: true });
  await buildForwarder(bundle);
  console.log(
    `infra/k8s configured from ${result.stack}${result.image ? ` (image ${result.image})` : ''}, forwarder bundle built; now: kubectl apply --server-side -k infra/k8s`,
  );
}
