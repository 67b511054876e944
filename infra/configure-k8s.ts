import { readFileSync, writeFileSync } from 'node:fs';
import { forwarderConfigSchema } from '../functions/forwarder/config';

/**
 * `npm run k8s:configure [-- cdk-outputs.json]`: writes what `kubectl apply -k infra/k8s` needs
 * from the stack's outputs (`npx cdk deploy --outputs-file cdk-outputs.json`): the forwarder's
 * configuration and its image. (With IRSA, the ServiceAccount's role annotation is still added by
 * hand from the ForwarderRoleArn output; Pod Identity needs nothing.)
 */
export function configureKustomization(
  outputs: Record<string, Record<string, string>>,
  files: { config: string; kustomization: string },
): { stack: string; image?: string } {
  const stacks = Object.entries(outputs).filter(([, values]) => 'ForwarderConfig' in values);
  if (stacks.length !== 1) {
    throw new Error(
      `expected the outputs of one serverless-service-controller stack, found ${stacks.length}`,
    );
  }
  const [stack, values] = stacks[0] as [string, Record<string, string>];
  // Validated as the forwarder will validate it, so a bad value fails here, not in the pod.
  const config = forwarderConfigSchema.parse(JSON.parse(values.ForwarderConfig ?? ''));
  writeFileSync(files.config, `${JSON.stringify(config, null, 2)}\n`);
  const image = values.ForwarderImageUri;
  if (image !== undefined) {
    const at = image.lastIndexOf(':');
    const [name, tag] = [image.slice(0, at), image.slice(at + 1)];
    const text = readFileSync(files.kustomization, 'utf8');
    const updated = text.replace(
      /(- name: forwarder\n\s+newName: ).*\n(\s+newTag: ).*/,
      (_match, nameLine: string, tagLine: string) => `${nameLine}${name}\n${tagLine}${tag}`,
    );
    if (updated === text && !text.includes(`newName: ${name}`)) {
      throw new Error(`no 'images: - name: forwarder' entry to update in ${files.kustomization}`);
    }
    writeFileSync(files.kustomization, updated);
  }
  return { stack, ...(image !== undefined ? { image } : {}) };
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const path = process.argv[2] ?? 'cdk-outputs.json';
  const result = configureKustomization(
    JSON.parse(readFileSync(path, 'utf8')) as Record<string, Record<string, string>>,
    { config: 'infra/k8s/config/controller.json', kustomization: 'infra/k8s/kustomization.yaml' },
  );
  console.log(
    `infra/k8s configured from ${result.stack}${result.image ? ` (image ${result.image})` : ''}; now: kubectl apply -k infra/k8s`,
  );
}
