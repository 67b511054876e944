import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { load, loadAll } from 'js-yaml';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildForwarder, forwarderBundleLimitBytes } from '../../functions/forwarder/build';
import { forwarderConfigSchema } from '../../functions/forwarder/config';
import { k8sUsage, runK8sCommand } from '../../functions/local/k8s-render';
import { sampleForwarderConfig } from '../support/forwarder-config';

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;
// CI installs kubectl (.ci/run) and sets this, so a missing kubectl fails there instead of skipping.
if (process.env.REQUIRE_KUBECTL === '1' && !hasKubectl) {
  throw new Error('REQUIRE_KUBECTL is set but kubectl is not on PATH');
}

const config = sampleForwarderConfig;
const builtImage = '123456789012.dkr.ecr.eu-west-1.amazonaws.com/cdk-hnb659fds-container-assets';
const manifests = [
  'controller-rbac.yaml',
  'deployment.yaml',
  'namespace.yaml',
  'rbac.yaml',
  'serviceaccount.yaml',
];

const work = mkdtempSync(join(tmpdir(), 'k8s-render-'));
function outputsFile(name: string, outputs: unknown): string {
  const path = join(work, name);
  writeFileSync(path, typeof outputs === 'string' ? outputs : JSON.stringify(outputs));
  return path;
}
/** Two stacks: the standalone app's, and a ServiceController construct `Lb` in a stack of one's own. */
const twoStacks = outputsFile('two-stacks.json', {
  'ServerlessServiceController-other': {
    ForwarderConfig: JSON.stringify({ ...config, clusterName: 'other' }),
    WorkQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/other',
  },
  Platform: {
    ClusterEndpoint: 'https://example.com',
    LbForwarderConfig0A1B2C3D: JSON.stringify(config),
    LbForwarderImageUri9F8E7D6C: `${builtImage}:abc123`,
  },
});
const standalone = outputsFile('standalone.json', {
  'ServerlessServiceController-demo': { ForwarderConfig: JSON.stringify(config) },
});

/** runK8sCommand with what it prints. */
async function k8s(...argv: string[]) {
  const stdout: string[] = [];
  const stderr: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((text: string) => void stdout.push(text));
  vi.spyOn(console, 'error').mockImplementation((text: string) => void stderr.push(text));
  const code = await runK8sCommand(argv);
  vi.restoreAllMocks();
  return { code, stdout: stdout.join('\n'), stderr: stderr.join('\n') };
}
afterEach(() => vi.restoreAllMocks());

const read = (dir: string, file: string) => readFileSync(join(dir, file), 'utf8');
const filesIn = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name).slice(dir.length + 1))
    .sort();

interface Kustomization {
  resources: string[];
  configMapGenerator: { name: string; files: string[] }[];
  images: { name: string; newName: string; newTag?: string; digest?: string }[];
  patches?: { path: string }[];
}
interface KubeObject {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  spec?: {
    replicas?: number;
    minAvailable?: number;
    selector?: { matchLabels: Record<string, string> };
    template?: {
      metadata: { labels: Record<string, string> };
      spec: {
        priorityClassName?: string;
        containers: {
          image: string;
          env: { name: string; valueFrom?: { configMapKeyRef?: { name: string } } }[];
        }[];
        volumes: { configMap?: { name: string } }[];
      };
    };
  };
}

/** What `kubectl apply --server-side -k` would send, as kubectl's own kustomize renders it. */
function kustomize(dir: string): KubeObject[] {
  const rendered = spawnSync('kubectl', ['kustomize', dir], {
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  expect(rendered.status, rendered.stderr).toBe(0);
  return loadAll(rendered.stdout) as KubeObject[];
}

function podOf(objects: KubeObject[]) {
  const deployment = objects.find(
    (o) => o.kind === 'Deployment' && o.metadata.name === 'forwarder',
  );
  return { deployment, pod: deployment?.spec?.template?.spec };
}

describe('k8s render: a construct in a stack of its own, with every option', () => {
  const out = join(work, 'gitops', 'clusters', 'demo');
  let rendered: Awaited<ReturnType<typeof k8s>>;

  beforeAll(async () => {
    rendered = await k8s(
      'render',
      '--stack-outputs',
      twoStacks,
      '--out',
      out,
      '--stack',
      'Platform',
      '--replicas',
      '2',
      '--priority-class',
      'forwarder-critical',
      '--pdb',
    );
  }, 60_000);

  it('writes the manifests, the configuration, the bundle and the options, and says what it rendered', () => {
    expect(rendered.stderr).toBe('');
    expect(rendered.code).toBe(0);
    expect(rendered.stdout).toContain('Platform.LbForwarderConfig0A1B2C3D');
    expect(rendered.stdout).toContain(`image ${builtImage}:abc123`);
    expect(filesIn(out)).toEqual(
      [
        ...manifests,
        'code/forwarder.mjs',
        'config/controller.json',
        'forwarder-options.yaml',
        'kustomization.yaml',
        'pdb.yaml',
      ].sort(),
    );
    for (const file of manifests) {
      expect(read(out, file), file).toBe(readFileSync(join('infra/k8s', file), 'utf8'));
    }
    // The chosen stack's configuration, as the forwarder reads it (its defaults filled in).
    expect(JSON.parse(read(out, 'config/controller.json'))).toEqual(
      forwarderConfigSchema.parse(config),
    );
  });

  it('the kustomization runs the stack-built image and adds the options to the shipped one', () => {
    const kustomization = read(out, 'kustomization.yaml');
    expect(kustomization).toMatch(/^# Rendered by serverless-service-controller /);
    expect(kustomization).not.toContain('npm run k8s:configure');
    const parsed = load(kustomization) as Kustomization;
    const shipped = load(read('infra/k8s', 'kustomization.yaml')) as Kustomization;
    expect(parsed.resources).toEqual([...shipped.resources, 'pdb.yaml']);
    expect(parsed.configMapGenerator).toEqual(shipped.configMapGenerator);
    expect(parsed.images).toEqual([{ name: 'forwarder', newName: builtImage, newTag: 'abc123' }]);
    expect(parsed.patches).toEqual([{ path: 'forwarder-options.yaml' }]);
  });

  it('the bundle is the forwarder built from the package sources, small enough for a ConfigMap', async () => {
    const bundle = read(out, 'code/forwarder.mjs');
    expect(Buffer.byteLength(bundle)).toBeLessThan(forwarderBundleLimitBytes);
    const reference = join(work, 'reference', 'forwarder.mjs');
    await buildForwarder(reference);
    expect(bundle).toBe(readFileSync(reference, 'utf8'));
  }, 60_000);

  it.skipIf(!hasKubectl)(
    'kubectl kustomize renders the image, replicas, priority class, content-named ConfigMaps and the budget',
    () => {
      const objects = kustomize(out);
      const { deployment, pod } = podOf(objects);
      expect(deployment?.metadata.namespace).toBe('serverless-service-controller');
      expect(deployment?.spec?.replicas).toBe(2);
      expect(pod?.priorityClassName).toBe('forwarder-critical');
      expect(pod?.containers[0]?.image).toBe(`${builtImage}:abc123`);
      const configMap = (prefix: string) =>
        objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith(`${prefix}-`));
      const code = configMap('forwarder-code');
      const configuration = configMap('forwarder-config');
      // kustomize's hash suffix: a new bundle or configuration rolls the Deployment.
      expect(code?.metadata.name).toMatch(/^forwarder-code-[a-z0-9]{10}$/);
      expect(configuration?.metadata.name).toMatch(/^forwarder-config-[a-z0-9]{10}$/);
      expect(code?.data?.['main.mjs']).toBe(read(out, 'code/forwarder.mjs'));
      expect(configuration?.data?.['controller.json']).toBe(read(out, 'config/controller.json'));
      expect(pod?.volumes.map((v) => v.configMap?.name)).toContain(code?.metadata.name);
      const env = pod?.containers[0]?.env.find((e) => e.name === 'CONTROLLER_CONFIG');
      expect(env?.valueFrom?.configMapKeyRef?.name).toBe(configuration?.metadata.name);
      const pdb = objects.find((o) => o.kind === 'PodDisruptionBudget');
      expect(pdb?.metadata.namespace).toBe('serverless-service-controller');
      expect(pdb?.spec?.minAvailable).toBe(1);
      // The budget covers exactly the forwarder's pods.
      expect(pdb?.spec?.selector?.matchLabels).toEqual(deployment?.spec?.selector?.matchLabels);
      expect(deployment?.spec?.template?.metadata.labels).toMatchObject(
        pdb?.spec?.selector?.matchLabels ?? { missing: true },
      );
    },
  );
});

describe('k8s render: the standalone app, no options', () => {
  const out = join(work, 'standalone');

  it('runs the pinned base image with one replica and no budget', async () => {
    const rendered = await k8s('render', '--stack-outputs', standalone, '--out', out);
    expect(rendered.stderr).toBe('');
    expect(rendered.code).toBe(0);
    expect(filesIn(out)).toEqual(
      [...manifests, 'code/forwarder.mjs', 'config/controller.json', 'kustomization.yaml'].sort(),
    );
    const shipped = load(read('infra/k8s', 'kustomization.yaml')) as Kustomization;
    const parsed = load(read(out, 'kustomization.yaml')) as Kustomization;
    expect(parsed.images).toEqual(shipped.images);
    expect(parsed.images[0]?.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(parsed.patches).toBeUndefined();
    if (!hasKubectl) return;
    const objects = kustomize(out);
    const { deployment, pod } = podOf(objects);
    expect(deployment?.spec?.replicas).toBe(1);
    expect(pod?.priorityClassName).toBeUndefined();
    expect(pod?.containers[0]?.image).toBe(
      `${shipped.images[0]?.newName ?? ''}@${shipped.images[0]?.digest ?? ''}`,
    );
    expect(objects.some((o) => o.kind === 'PodDisruptionBudget')).toBe(false);
  }, 60_000);

  it('renders again only with --force, replacing its own files and leaving others', async () => {
    const dir = join(work, 'again');
    mkdirSync(dir);
    writeFileSync(join(dir, 'README.md'), 'notes of our own\n');
    // A previous render's budget, which this render (without --pdb) must not leave listed or behind.
    writeFileSync(join(dir, 'pdb.yaml'), 'stale\n');
    const refused = await k8s('render', '--stack-outputs', standalone, '--out', dir);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/not empty; give --force/);
    expect(filesIn(dir)).toEqual(['README.md', 'pdb.yaml']);

    const mirror = `registry.example.com/mirror/nodejs24@sha256:${'a'.repeat(64)}`;
    const forced = await k8s(
      'render',
      '--stack-outputs',
      standalone,
      '--out',
      dir,
      '--force',
      '--image',
      mirror,
    );
    expect(forced.stderr).toBe('');
    expect(forced.code).toBe(0);
    expect(read(dir, 'README.md')).toBe('notes of our own\n');
    expect(existsSync(join(dir, 'pdb.yaml'))).toBe(false);
    expect((load(read(dir, 'kustomization.yaml')) as Kustomization).images).toEqual([
      {
        name: 'forwarder',
        newName: 'registry.example.com/mirror/nodejs24',
        digest: `sha256:${'a'.repeat(64)}`,
      },
    ]);
  }, 60_000);

  it('works from any working directory through the CLI (bin/, here on the sources; test/package runs the installed one)', () => {
    const cwd = mkdtempSync(join(tmpdir(), 'k8s-render-cwd-'));
    writeFileSync(join(cwd, 'cdk-outputs.json'), read(work, 'standalone.json'));
    const cli = spawnSync(
      process.execPath,
      [
        resolve('bin/serverless-service-controller.mjs'),
        'k8s',
        'render',
        '--stack-outputs',
        'cdk-outputs.json',
        '--out',
        'gitops/demo',
      ],
      { cwd, encoding: 'utf8' },
    );
    expect(cli.status, cli.stderr).toBe(0);
    expect(cli.stdout).toContain('kubectl apply --server-side -k gitops/demo');
    const out = join(cwd, 'gitops', 'demo');
    expect(filesIn(out)).toEqual(filesIn(join(work, 'standalone')));
    expect(read(out, 'code/forwarder.mjs')).toBe(
      read(join(work, 'standalone'), 'code/forwarder.mjs'),
    );
  }, 90_000);
});

describe('k8s render refuses, before writing anything', () => {
  const out = join(work, 'refused');
  const render = (...argv: string[]) => ['render', '--out', out, ...argv];
  const notOutputs = outputsFile('not-outputs.json', [{ ForwarderConfig: '{}' }]);
  const notJson = outputsFile('not-json.json', '{"Stack": ');
  const noController = outputsFile('no-controller.json', { Stack: { WorkQueueUrl: 'x' } });
  const twoInOneStack = outputsFile('two-in-one.json', {
    Platform: {
      BlueForwarderConfig0A1B2C3D: JSON.stringify(config),
      GreenForwarderConfig0A1B2C3D: JSON.stringify(config),
    },
  });
  const badConfig = outputsFile('bad-config.json', {
    Stack: { ForwarderConfig: JSON.stringify({ ...config, queueUrl: 'not a url', region: 'x' }) },
  });
  const file = outputsFile('a-file', 'x');

  it.each([
    ['no command', [], /^k8s: which command\? \(render\)/, true],
    ['another command', ['deploy'], /^k8s deploy: no such command/, true],
    ['an unknown option', render('--stack-outputs', standalone, '--bogus'), /--bogus/, true],
    ['no outputs file', render(), /--stack-outputs FILE is required/, true],
    ['no --out', ['render', '--stack-outputs', standalone], /--out DIR is required/, true],
    ['a missing file', render('--stack-outputs', join(work, 'nope.json')), /ENOENT/, false],
    ['a file that is not JSON', render('--stack-outputs', notJson), /not JSON/, false],
    [
      'JSON that is not stack outputs',
      render('--stack-outputs', notOutputs),
      /not what cdk deploy --outputs-file writes/,
      false,
    ],
    [
      'no controller',
      render('--stack-outputs', noController),
      /found 0: no output named ForwarderConfig/,
      false,
    ],
    [
      'two controllers in two stacks',
      render('--stack-outputs', twoStacks),
      /found 2 \(ServerlessServiceController-other\.ForwarderConfig, Platform\.LbForwarderConfig0A1B2C3D\): choose one with --stack/,
      false,
    ],
    [
      'two controllers in one stack, and only the stack named',
      render('--stack-outputs', twoInOneStack, '--stack', 'Platform'),
      /found 2 \(Platform\.BlueForwarderConfig0A1B2C3D, Platform\.GreenForwarderConfig0A1B2C3D\)/,
      false,
    ],
    [
      'a stack without a controller',
      render('--stack-outputs', twoStacks, '--stack', 'Nope'),
      /--stack Nope: no serverless-service-controller outputs there; the file has ServerlessServiceController-other\.ForwarderConfig, Platform\.LbForwarderConfig0A1B2C3D/,
      false,
    ],
    [
      'a configuration the forwarder would refuse',
      render('--stack-outputs', badConfig),
      /Stack\.ForwarderConfig: invalid forwarder configuration:\n {2}- region: .*\n {2}- queueUrl: /,
      false,
    ],
    [
      'no replicas',
      render('--stack-outputs', standalone, '--replicas', '0'),
      /--replicas: 0/,
      true,
    ],
    [
      'words for replicas',
      render('--stack-outputs', standalone, '--replicas', 'two'),
      /'two'/,
      true,
    ],
    ['a fraction', render('--stack-outputs', standalone, '--replicas', '1.5'), /'1\.5'/, true],
    ['too many replicas', render('--stack-outputs', standalone, '--replicas', '6'), /1 to 5/, true],
    [
      'a budget over one replica',
      render('--stack-outputs', standalone, '--pdb'),
      /--pdb needs --replicas 2 or more: .* would block every node drain/,
      true,
    ],
    [
      'a budget over --replicas 1',
      render('--stack-outputs', standalone, '--pdb', '--replicas', '1'),
      /--pdb needs --replicas 2/,
      true,
    ],
    [
      'a priority class name Kubernetes would refuse',
      render('--stack-outputs', standalone, '--priority-class', 'Forwarder_Critical'),
      /'Forwarder_Critical' is not a PriorityClass name/,
      true,
    ],
    [
      '--out naming a file',
      ['render', '--stack-outputs', standalone, '--out', file],
      /not a directory/,
      false,
    ],
  ])('%s', async (_case, argv, message, usage) => {
    const result = await k8s(...argv);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message);
    expect(result.stderr.includes(k8sUsage)).toBe(usage);
    expect(existsSync(out)).toBe(false);
  });

  it('--help prints the usage', async () => {
    const help = await k8s('render', '--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toBe(k8sUsage);
  });
});
