import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { forwarderConfigSchema } from '../functions/forwarder/config';
import { buildForwarder } from '../functions/forwarder/build';

/**
 * `npm run k8s:configure [-- cdk-outputs.json] [--image REF]`: writes what
 * `kubectl apply --server-side -k infra/k8s` needs from the stack's outputs
 * (`npx cdk deploy --outputs-file cdk-outputs.json`): the forwarder's configuration, its bundle
 * (built from this checkout, so it matches the functions just deployed) and, when an image of
 * your own is given or the stack built one, that image. (With IRSA, the ServiceAccount's role
 * annotation is still added by hand from the ForwarderRoleArn output; Pod Identity needs nothing.)
 */
/**
 * The ForwarderConfig output: the standalone app's, or a ServiceController construct's in a stack
 * of your own, whose output IDs CDK prefixes with the construct's path and suffixes with a hash.
 */
const forwarderConfigKey = /^([A-Za-z0-9]*)ForwarderConfig(?:[0-9A-F]{8})?$/;

export function configureKustomization(
  outputs: Record<string, Record<string, string>>,
  files: { config: string; kustomization: string },
  options: { image?: string | undefined } = {},
): { stack: string; image?: string } {
  const controllers = Object.entries(outputs).flatMap(([stack, values]) =>
    Object.keys(values).flatMap((key) => {
      const prefix = forwarderConfigKey.exec(key)?.[1];
      return prefix === undefined ? [] : [{ stack, values, key, prefix }];
    }),
  );
  if (controllers.length !== 1) {
    throw new Error(
      `expected the outputs of one serverless-service-controller, found ${controllers.length}${controllers.length > 1 ? ` (${controllers.map((c) => `${c.stack}.${c.key}`).join(', ')}): give only its stack's outputs` : ''}`,
    );
  }
  const { stack, values, key, prefix } = controllers[0]!;
  // Validated as the forwarder will validate it, so a bad value fails here, not in the pod.
  const config = forwarderConfigSchema.parse(JSON.parse(values[key] ?? ''));
  writeFileSync(files.config, `${JSON.stringify(config, null, 2)}\n`);
  const builtImage = Object.entries(values).find(([name]) =>
    new RegExp(`^${prefix}ForwarderImageUri(?:[0-9A-F]{8})?$`).test(name),
  )?.[1];
  const image = options.image ?? builtImage;
  if (image !== undefined) {
    const text = readFileSync(files.kustomization, 'utf8');
    const updated = withForwarderImage(text, image);
    if (updated === undefined) {
      throw new Error(`no 'images: - name: forwarder' entry to update in ${files.kustomization}`);
    }
    writeFileSync(files.kustomization, updated);
  }
  return { stack, ...(image !== undefined ? { image } : {}) };
}

/**
 * The kustomization with the forwarder's image set to `reference` (`repo:tag` or
 * `repo@sha256:…`); undefined when it has no forwarder image entry.
 */
export function withForwarderImage(kustomization: string, reference: string): string | undefined {
  const at = reference.indexOf('@');
  const colon = reference.lastIndexOf(':');
  const [name, pin] =
    at >= 0
      ? [reference.slice(0, at), `digest: ${reference.slice(at + 1)}`]
      : colon > reference.lastIndexOf('/')
        ? [reference.slice(0, colon), `newTag: ${reference.slice(colon + 1)}`]
        : [reference, 'newTag: latest'];
  const entry = /(- name: forwarder\n)((?:[ \t]+(?:newName|newTag|digest): .*\n)+)/;
  const match = entry.exec(kustomization);
  if (match === null) return undefined;
  const indent = /^[ \t]+/.exec(match[2] ?? '')?.[0] ?? '    ';
  return kustomization.replace(
    entry,
    (_all, head: string) => `${head}${indent}newName: ${name}\n${indent}${pin}\n`,
  );
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const { values, positionals } = parseArgs({
    options: { image: { type: 'string' } },
    allowPositionals: true,
  });
  const path = positionals[0] ?? 'cdk-outputs.json';
  const result = configureKustomization(
    JSON.parse(readFileSync(path, 'utf8')) as Record<string, Record<string, string>>,
    { config: 'infra/k8s/config/controller.json', kustomization: 'infra/k8s/kustomization.yaml' },
    { image: values.image },
  );
  const bundle = 'infra/k8s/code/forwarder.mjs';
  mkdirSync(dirname(bundle), { recursive: true });
  await buildForwarder(bundle);
  console.log(
    `infra/k8s configured from ${result.stack}${result.image ? ` (image ${result.image})` : ''}, forwarder bundle built; now: kubectl apply --server-side -k infra/k8s`,
  );
}
