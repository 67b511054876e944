/**
 * `serverless-service-controller k8s render`: the forwarder's kustomization for one cluster,
 * complete in one directory, from the stack's outputs alone. It works the same from a checkout
 * (TypeScript sources) and from the installed package (dist/cli), and writes nothing of the
 * package's own, so a GitOps repository can hold one rendered directory per cluster.
 *
 * Only Node built-ins, js-yaml, esbuild (through buildForwarder) and the forwarder's schema: the
 * Kubernetes client is an optional dependency, which this command must not need.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { dump, load } from 'js-yaml';
import { forwarderConfigFromEnvironment, type ForwarderConfig } from '../forwarder/config';
import { packageRoot } from '../package/package-root';

/** What `cdk deploy --outputs-file` writes: stack name to output name to value. */
export type StackOutputs = Record<string, Record<string, string>>;

/** The outputs of one controller, found in a stack outputs file. */
export interface ForwarderOutputs {
  readonly stack: string;
  /** The ForwarderConfig output's name (`ForwarderConfig`, or `<construct path>ForwarderConfig<hash>`). */
  readonly key: string;
  /** The ForwarderConfig output: the forwarder's configuration as JSON text. */
  readonly config: string;
  /** The ForwarderImageUri output, when the stack built an image (`forwarderImageBuild`). */
  readonly image?: string;
}

/** A problem with what the user gave (arguments, files), reported without a stack trace. */
export class K8sRenderError extends Error {
  override readonly name = 'K8sRenderError';
  constructor(
    message: string,
    /** Whether the usage helps: the arguments themselves were wrong, not what they name. */
    readonly showUsage = false,
  ) {
    super(message);
  }
}

/**
 * The ForwarderConfig output: the standalone app's, or a ServiceController construct's in a stack
 * of your own, whose output IDs CDK prefixes with the construct's path and suffixes with a hash.
 */
const forwarderConfigKey = /^([A-Za-z0-9]*)ForwarderConfig(?:[0-9A-F]{8})?$/;

/**
 * The one controller in `outputs`. `stack` chooses among several: a stack name, or `STACK.OUTPUT`
 * as the ambiguity error lists them (for several constructs in one stack).
 */
export function findForwarderOutputs(
  outputs: StackOutputs,
  options: { stack?: string | undefined } = {},
): ForwarderOutputs {
  const all = Object.entries(outputs).flatMap(([stack, values]) =>
    Object.keys(values).flatMap((key) => {
      const prefix = forwarderConfigKey.exec(key)?.[1];
      return prefix === undefined ? [] : [{ stack, values, key, prefix }];
    }),
  );
  const { stack: chosen } = options;
  const controllers =
    chosen === undefined
      ? all
      : all.filter((c) => c.stack === chosen || `${c.stack}.${c.key}` === chosen);
  const listed = (list: typeof all) => list.map((c) => `${c.stack}.${c.key}`).join(', ');
  if (chosen !== undefined && controllers.length === 0) {
    throw new K8sRenderError(
      `--stack ${chosen}: no serverless-service-controller outputs there; ${all.length > 0 ? `the file has ${listed(all)}` : `the file has no ForwarderConfig output (stacks: ${Object.keys(outputs).join(', ') || 'none'})`}`,
    );
  }
  if (controllers.length !== 1) {
    throw new K8sRenderError(
      `expected the outputs of one serverless-service-controller, found ${controllers.length}${
        controllers.length > 1
          ? ` (${listed(controllers)}): choose one with --stack STACK, or --stack STACK.OUTPUT as listed`
          : ': no output named ForwarderConfig (the standalone app) or <construct>ForwarderConfig<hash> (the construct); were these outputs written by cdk deploy --outputs-file?'
      }`,
    );
  }
  const { stack, values, key, prefix } = controllers[0]!;
  const config = values[key];
  if (typeof config !== 'string') {
    throw new K8sRenderError(`${stack}.${key}: not a string (the configuration as JSON text)`);
  }
  const image = Object.entries(values).find(([name]) =>
    new RegExp(`^${prefix}ForwarderImageUri(?:[0-9A-F]{8})?$`).test(name),
  )?.[1];
  return { stack, key, config, ...(typeof image === 'string' ? { image } : {}) };
}

/**
 * The ForwarderConfig output, validated as the forwarder validates it at start, so a bad value
 * fails here, with every problem named, rather than in a crash-looping pod.
 */
export function forwarderConfigOf(found: ForwarderOutputs): ForwarderConfig {
  try {
    return forwarderConfigFromEnvironment({ CONTROLLER_CONFIG: found.config });
  } catch (error) {
    throw new K8sRenderError(`${found.stack}.${found.key}: ${(error as Error).message}`);
  }
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

/** More replicas only add load: each watches every Service and Node and sends every change. */
export const maxForwarderReplicas = 5;

export interface RenderOptions {
  /** The stack outputs (`cdk deploy --outputs-file`). */
  readonly outputs: StackOutputs;
  /** The directory to write; absent or empty unless `force`. */
  readonly out: string;
  readonly stack?: string | undefined;
  /** The image that runs the bundle; default the stack's ForwarderImageUri, else the pinned base. */
  readonly image?: string | undefined;
  /** 1 to {@link maxForwarderReplicas}; default the manifests' 1. */
  readonly replicas?: number | undefined;
  readonly priorityClass?: string | undefined;
  /** A PodDisruptionBudget of minAvailable 1: only with `replicas` of 2 or more. */
  readonly pdb?: boolean | undefined;
  /** Write into a non-empty `out`, replacing the files a render writes (and only those). */
  readonly force?: boolean | undefined;
}

export interface RenderResult {
  readonly stack: string;
  readonly outputKey: string;
  /** The image the Deployment runs, as given, from the stack, or the manifests' pinned default. */
  readonly image: string;
  /** The files written, relative to `out`. */
  readonly files: readonly string[];
}

// The paths the manifests' configMapGenerator reads; the render writes them.
const configFile = 'config/controller.json';
const bundleFile = 'code/forwarder.mjs';
// Written only with options, so a render without them removes a previous render's.
const optionsPatchFile = 'forwarder-options.yaml';
const pdbFile = 'pdb.yaml';

interface Template {
  readonly dir: string;
  readonly version: string;
  readonly kustomization: string;
  readonly resources: readonly string[];
  readonly defaultImage: string;
  readonly podLabels: Record<string, string>;
}

/** The package's own manifests (infra/k8s), checked for what the render relies on. */
function readTemplate(root: string): Template {
  const dir = join(root, 'infra', 'k8s');
  const kustomization = readFileSync(join(dir, 'kustomization.yaml'), 'utf8');
  const parsed = load(kustomization) as {
    resources?: unknown;
    configMapGenerator?: { files?: unknown }[];
    images?: { name?: unknown; newName?: unknown; digest?: unknown; newTag?: unknown }[];
  };
  const resources = parsed.resources;
  const generated = JSON.stringify(parsed.configMapGenerator?.map((g) => g.files));
  const image = parsed.images?.find((i) => i.name === 'forwarder');
  const deployment = load(readFileSync(join(dir, 'deployment.yaml'), 'utf8')) as {
    spec?: { selector?: { matchLabels?: unknown } };
  };
  const podLabels = deployment.spec?.selector?.matchLabels;
  if (
    !Array.isArray(resources) ||
    !resources.every((r): r is string => typeof r === 'string' && !r.includes('/')) ||
    !generated.includes(`"${configFile}"`) ||
    !generated.includes(`=${bundleFile}"`) ||
    typeof image?.newName !== 'string' ||
    typeof podLabels !== 'object' ||
    podLabels === null
  ) {
    throw new Error(`${dir}: not the manifests this render knows (a broken package?)`);
  }
  const pin =
    typeof image.digest === 'string'
      ? `@${image.digest}`
      : typeof image.newTag === 'string'
        ? `:${image.newTag}`
        : '';
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    version: string;
  };
  return {
    dir,
    version,
    kustomization,
    resources,
    defaultImage: `${image.newName}${pin}`,
    podLabels: podLabels as Record<string, string>,
  };
}

/** The kustomization's own header names `npm run k8s:configure`; the render's says what it is. */
function renderedKustomization(
  template: Template,
  found: ForwarderOutputs,
  options: RenderOptions,
): string {
  const header = [
    `# Rendered by serverless-service-controller ${template.version} (k8s render) from the outputs of`,
    `# ${found.stack}.${found.key}: the forwarder of one cluster, with its configuration`,
    `# (${configFile}) and its code (${bundleFile}, the bundle of that release). Render again`,
    '# rather than edit, on every upgrade or stack change; keep changes of your own in an overlay',
    '# (docs/forwarder.md#gitops). Apply server-side: kubectl apply --server-side -k <this directory>',
    "# (the code ConfigMap is larger than client-side apply's last-applied annotation may hold).",
  ].join('\n');
  let text = `${header}\n${template.kustomization.replace(/^(?:#.*\n)+/, '')}`;
  if (options.image !== undefined || found.image !== undefined) {
    const updated = withForwarderImage(text, options.image ?? found.image ?? '');
    if (updated === undefined) throw new Error('no forwarder image entry in the kustomization');
    text = updated;
  }
  if (options.pdb === true) {
    const list = /^resources:\n((?:[ \t]+- .*\n)+)/m;
    const indent = /^[ \t]+/.exec(list.exec(text)?.[1] ?? '')?.[0];
    if (indent === undefined) throw new Error('no resources list in the kustomization');
    text = text.replace(list, (all) => `${all}${indent}- ${pdbFile}\n`);
  }
  if (options.replicas !== undefined || options.priorityClass !== undefined) {
    text += `# k8s render's --replicas and --priority-class.\npatches:\n  - path: ${optionsPatchFile}\n`;
  }
  // The edits are textual, to keep the manifests' comments: check they said what was meant.
  const check = load(text) as { resources: string[]; patches?: { path: string }[] };
  if (
    check.resources.includes(pdbFile) !== (options.pdb === true) ||
    (check.patches?.some((p) => p.path === optionsPatchFile) ?? false) !==
      (options.replicas !== undefined || options.priorityClass !== undefined)
  ) {
    throw new Error('the rendered kustomization does not hold the options asked for');
  }
  return text;
}

function optionsPatch(options: RenderOptions): string {
  const podSpec =
    options.priorityClass !== undefined ? { priorityClassName: options.priorityClass } : {};
  return dump({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'forwarder' },
    spec: {
      ...(options.replicas !== undefined ? { replicas: options.replicas } : {}),
      ...(options.priorityClass !== undefined ? { template: { spec: podSpec } } : {}),
    },
  });
}

function podDisruptionBudget(template: Template): string {
  const comment = [
    '# k8s render --pdb: a drain evicts a forwarder only while another is available. With one',
    '# replica this would block every drain, hence only with --replicas 2 or more. A forwarder that',
    '# is not Ready may always be evicted, so a failing one never holds a node.',
  ].join('\n');
  return `${comment}\n${dump({
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: {
      name: 'forwarder',
      labels: {
        'app.kubernetes.io/name': 'forwarder',
        'app.kubernetes.io/part-of': 'serverless-service-controller',
      },
    },
    spec: {
      minAvailable: 1,
      unhealthyPodEvictionPolicy: 'AlwaysAllow',
      selector: { matchLabels: template.podLabels },
    },
  })}`;
}

function checkOptions(options: RenderOptions): void {
  const { replicas, priorityClass, image } = options;
  if (
    replicas !== undefined &&
    (!Number.isInteger(replicas) || replicas < 1 || replicas > maxForwarderReplicas)
  ) {
    throw new K8sRenderError(
      `--replicas: ${replicas} is not a whole number from 1 to ${maxForwarderReplicas} (each replica watches and forwards everything: two ride out a node drain, more only add load)`,
      true,
    );
  }
  if (options.pdb === true && (replicas ?? 1) < 2) {
    throw new K8sRenderError(
      '--pdb needs --replicas 2 or more: a budget of minAvailable 1 over one replica would block every node drain',
      true,
    );
  }
  if (
    priorityClass !== undefined &&
    !(priorityClass.length <= 253 && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(priorityClass))
  ) {
    throw new K8sRenderError(
      `--priority-class: '${priorityClass}' is not a PriorityClass name (lower-case letters, digits, '-' and '.')`,
      true,
    );
  }
  if (image !== undefined && (image === '' || /\s/.test(image) || image.startsWith('-'))) {
    throw new K8sRenderError(
      `--image: '${image}' is not an image reference (REPO:TAG or REPO@sha256:…)`,
      true,
    );
  }
}

/** Absent or empty, or `force`: the render never mixes with files it does not know about silently. */
function checkOut(out: string, force: boolean): void {
  if (!existsSync(out)) return;
  if (!statSync(out).isDirectory()) throw new K8sRenderError(`--out ${out}: not a directory`);
  if (!force && readdirSync(out).length > 0) {
    throw new K8sRenderError(
      `--out ${out}: not empty; give --force to render again into it (only the files a render writes are replaced)`,
    );
  }
}

/** The forwarder of this release, built from the package's own sources. */
async function buildBundle(outfile: string): Promise<void> {
  await (await import('../forwarder/build')).buildForwarder(outfile);
  const { forwarderBundleLimitBytes: limit } = await import('../forwarder/build');
  const size = statSync(outfile).size;
  // kubectl would refuse it only at apply, far from the cause.
  if (size > limit) {
    throw new Error(
      `the forwarder bundle is ${size} bytes, over the ${limit} a ConfigMap leaves room for`,
    );
  }
}

/**
 * Writes into `options.out` a complete kustomization of the forwarder for the controller in
 * `options.outputs`: the package's manifests, the validated configuration, the forwarder bundle
 * built from the package's sources, the image, and the options asked for.
 */
export async function renderForwarderManifests(options: RenderOptions): Promise<RenderResult> {
  // Everything the user gave is checked before anything is written.
  checkOptions(options);
  const found = findForwarderOutputs(options.outputs, { stack: options.stack });
  const config = forwarderConfigOf(found);
  const out = resolve(options.out);
  checkOut(out, options.force === true);
  const root = packageRoot();
  const template = readTemplate(root);
  const kustomization = renderedKustomization(template, found, options);

  const files = new Map<string, string>([['kustomization.yaml', kustomization]]);
  for (const resource of template.resources) {
    files.set(resource, readFileSync(join(template.dir, resource), 'utf8'));
  }
  files.set(configFile, `${JSON.stringify(config, null, 2)}\n`);
  if (options.replicas !== undefined || options.priorityClass !== undefined) {
    files.set(optionsPatchFile, optionsPatch(options));
  }
  if (options.pdb === true) files.set(pdbFile, podDisruptionBudget(template));

  // The bundle is built first, apart: a failed build leaves the directory as it was, never a new
  // configuration beside the previous release's bundle for a GitOps commit to pick up.
  const staging = mkdtempSync(join(tmpdir(), 'ssc-render-'));
  try {
    await buildBundle(join(staging, 'forwarder.mjs'));
    files.set(bundleFile, readFileSync(join(staging, 'forwarder.mjs'), 'utf8'));
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  for (const optional of [optionsPatchFile, pdbFile]) {
    if (!files.has(optional)) rmSync(join(out, optional), { force: true });
  }
  for (const [name, text] of files) {
    mkdirSync(dirname(join(out, name)), { recursive: true });
    writeFileSync(join(out, name), text);
  }
  return {
    stack: found.stack,
    outputKey: found.key,
    image: options.image ?? found.image ?? template.defaultImage,
    files: [...files.keys()].sort(),
  };
}

export const k8sUsage = `Usage:
  serverless-service-controller k8s render --stack-outputs FILE --out DIR [OPTIONS]

Writes the forwarder's kustomization for one cluster into DIR, complete: the manifests,
config/controller.json from the stack's outputs, and code/forwarder.mjs, the forwarder of this
release. Commit DIR to the repository Argo CD or Flux syncs from, or apply it:
  kubectl apply --server-side -k DIR
Render again on every upgrade of the package or change of the stack (docs/forwarder.md#gitops).

Options:
  --stack-outputs FILE   the stack's outputs (cdk deploy --outputs-file FILE)
  --out DIR              where to write: absent or empty, unless --force
  --stack NAME           which controller, when FILE has several: a stack name, or STACK.OUTPUT
                         as the error lists them (several constructs in one stack)
  --image REF            the image that runs the bundle (REPO:TAG or REPO@sha256:…): a mirror of
                         the base image or your own build; default the stack's ForwarderImageUri
                         output, else the pinned gcr.io/distroless/nodejs24-debian12 digest
  --replicas N           forwarder replicas, 1-${maxForwarderReplicas} (default 1)
  --priority-class NAME  the forwarder pods' priorityClassName
  --pdb                  a PodDisruptionBudget (minAvailable 1); needs --replicas 2 or more
  --force                render into a non-empty DIR, replacing the files a render writes
`;

function readOutputs(path: string): StackOutputs {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new K8sRenderError(`--stack-outputs ${path}: ${(error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new K8sRenderError(`--stack-outputs ${path}: not JSON (${(error as Error).message})`);
  }
  const isRecord = (value: unknown): value is Record<string, unknown> =>
    typeof value === 'object' && value !== null && !Array.isArray(value);
  if (!isRecord(parsed) || !Object.values(parsed).every(isRecord)) {
    throw new K8sRenderError(
      `--stack-outputs ${path}: not what cdk deploy --outputs-file writes (an object of stacks, each an object of outputs)`,
    );
  }
  return parsed as StackOutputs;
}

/** `k8s …` from the command line: 0 done, 2 a usage or input error (printed, with no stack trace). */
export async function runK8sCommand(argv: string[]): Promise<number> {
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      options: {
        'stack-outputs': { type: 'string' },
        out: { type: 'string' },
        stack: { type: 'string' },
        image: { type: 'string' },
        replicas: { type: 'string' },
        'priority-class': { type: 'string' },
        pdb: { type: 'boolean' },
        force: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: true,
      strict: true,
    });
    if (values.help === true) {
      console.log(k8sUsage);
      return 0;
    }
    const [command, ...extra] = positionals;
    if (command !== 'render') {
      throw new K8sRenderError(
        command === undefined
          ? 'k8s: which command? (render)'
          : `k8s ${command}: no such command (render)`,
        true,
      );
    }
    if (extra.length > 0)
      throw new K8sRenderError(`k8s render: unexpected ${extra.join(' ')}`, true);
    const outputsPath = values['stack-outputs'];
    if (outputsPath === undefined)
      throw new K8sRenderError('k8s render: --stack-outputs FILE is required', true);
    if (values.out === undefined)
      throw new K8sRenderError('k8s render: --out DIR is required', true);
    const replicas = values.replicas;
    if (replicas !== undefined && !/^[0-9]+$/.test(replicas)) {
      throw new K8sRenderError(
        `--replicas: '${replicas}' is not a whole number from 1 to ${maxForwarderReplicas}`,
        true,
      );
    }
    const result = await renderForwarderManifests({
      outputs: readOutputs(outputsPath),
      out: values.out,
      stack: values.stack,
      image: values.image,
      replicas: replicas === undefined ? undefined : Number(replicas),
      priorityClass: values['priority-class'],
      pdb: values.pdb,
      force: values.force,
    });
    console.log(
      `${values.out}: the forwarder of ${result.stack}.${result.outputKey} (image ${result.image}), ${result.files.length} files; now commit it for Argo CD or Flux, or: kubectl apply --server-side -k ${values.out}`,
    );
    return 0;
  } catch (error) {
    const { code, message } = error as { code?: unknown; message?: string };
    const argumentError = typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS');
    if (!(error instanceof K8sRenderError) && !argumentError) throw error;
    const showUsage = argumentError || (error as K8sRenderError).showUsage;
    console.error(showUsage ? `${message ?? ''}\n\n${k8sUsage}` : (message ?? ''));
    return 2;
  }
}
