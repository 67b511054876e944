/**
 * What `npm pack` ships, and that it works once installed somewhere else: the tarball goes into a
 * fresh project (from the local npm cache, as a user's `npm install` would fetch it), its CLI
 * prints its usage, and a CDK app of that project synthesises the construct, bundling the three
 * functions from the installed sources with the installed esbuild and tsx.
 */
import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const manifest = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  devDependencies: Record<string, string>;
};

/**
 * The CLI's Kubernetes client needs Node 22 or later. `npm test` runs on the pinned Node 24 (the
 * `node` dev dependency); a bare `npx vitest` may run on an older system Node, so fall back to the
 * pinned one there, as the bin shim does in this checkout.
 */
function modernNode(): string {
  if (Number(process.versions.node.split('.')[0]) >= 22) return process.execPath;
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve('node/package.json')), 'bin', 'node');
}

/**
 * The children's environment: that Node first on PATH (npm, npx and the CLI run on it), and none
 * of the `npm_*` variables an enclosing `npm test` sets, which would point the nested npm at this
 * checkout instead of the temporary project.
 */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.toLowerCase().startsWith('npm_') && key !== 'INIT_CWD') env[key] = value;
  }
  env.PATH = [dirname(modernNode()), process.env.PATH ?? ''].join(delimiter);
  return env;
}

async function sh(command: string, args: string[], cwd: string): Promise<string> {
  const { stdout } = await run(command, args, {
    cwd,
    env: childEnv(),
    timeout: 150_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

const work = mkdtempSync(join(tmpdir(), 'ssc-package-'));
const consumer = join(work, 'consumer');
let tarball = '';
let entries: string[] = [];

beforeAll(async () => {
  const packed = JSON.parse(
    await sh('npm', ['pack', '--json', '--silent', '--pack-destination', work], repoRoot),
  ) as { filename: string }[];
  tarball = join(work, packed[0]?.filename ?? '');
  // What the tarball really holds (npm nests everything under `package/`).
  entries = (await sh('tar', ['-tzf', tarball], work))
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => line.replace(/^package\//, ''));
});

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('the packed tarball', () => {
  it('holds the construct, the CLI, the forwarder manifests and the docs', () => {
    expect(tarball).toMatch(new RegExp(`${manifest.name}-${manifest.version}\\.tgz$`));
    expect(entries).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'CHANGELOG.md',
        'tsconfig.json',
        'infra/index.ts',
        'infra/service-controller.ts',
        'infra/bundle-lambda.ts',
        'bin/serverless-service-controller.mjs',
        'functions/local/cli.ts',
        'functions/service-sync/handler.ts',
        'functions/node-sync/handler.ts',
        'functions/sweep/handler.ts',
        'infra/k8s/kustomization.yaml',
        'infra/k8s/deployment.yaml',
        'infra/k8s/controller-rbac.yaml',
        'docs/operations.md',
        'docs/upgrades.md',
        ...(existsSync(join(repoRoot, 'LICENSE')) ? ['LICENSE'] : []),
      ]),
    );
  });

  it('leaves out tests, benchmarks, CI, dependencies and build output', () => {
    const unwanted = entries.filter(
      (path) =>
        /^(test|bench|\.ci|\.changeset|node_modules|cdk\.out|coverage|dist)\//.test(path) ||
        /(^|\/)node_modules\//.test(path) ||
        /\.test\.ts$/.test(path) ||
        // The forwarder bundle is built per install (npm run k8s:configure), never shipped stale.
        path.startsWith('infra/k8s/code/'),
    );
    expect(unwanted).toEqual([]);
  });
});

describe('installed into a fresh project', () => {
  beforeAll(async () => {
    mkdirSync(consumer);
    writeFileSync(
      join(consumer, 'package.json'),
      JSON.stringify({ name: 'consumer', version: '0.0.0', private: true, type: 'module' }),
    );
    // The peer dependencies at the versions this checkout tests with, from the same cache.
    await sh(
      'npm',
      [
        'install',
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
        tarball,
        `aws-cdk-lib@${manifest.devDependencies['aws-cdk-lib']}`,
        `constructs@${manifest.devDependencies['constructs']}`,
      ],
      consumer,
    );
  });

  it('is a copy of its own, not a link back to this checkout', () => {
    const installed = realpathSync(join(consumer, 'node_modules', manifest.name));
    expect(installed.startsWith(realpathSync(repoRoot))).toBe(false);
    expect(existsSync(join(installed, 'test'))).toBe(false);
  });

  it('runs the CLI: npx serverless-service-controller --help', async () => {
    const usage = await sh('npx', ['--no-install', manifest.name, '--help'], consumer);
    expect(usage).toMatch(/^Usage:/m);
    expect(usage).toContain('serverless-service-controller uninstall');
  });

  it('synthesises a CDK app using the construct, bundling its functions', async () => {
    writeFileSync(
      join(consumer, 'app.ts'),
      [
        "import { App, Stack } from 'aws-cdk-lib';",
        "import { ServiceController } from 'serverless-service-controller';",
        "const app = new App({ outdir: 'cdk.out' });",
        "const stack = new Stack(app, 'Platform', {",
        "  env: { account: '123456789012', region: 'eu-west-1' },",
        '});',
        "new ServiceController(stack, 'Lb', { clusterName: 'demo', vpcId: 'vpc-0123abcd' });",
        'app.synth();',
        '',
      ].join('\n'),
    );
    await sh('npx', ['--no-install', 'tsx', 'app.ts'], consumer);

    const outdir = join(consumer, 'cdk.out');
    type Resource = { Type: string; Properties: Record<string, unknown> };
    const template = JSON.parse(readFileSync(join(outdir, 'Platform.template.json'), 'utf8')) as {
      Resources: Record<string, Resource>;
    };
    const idOf = (prefix: string, type: string) => {
      const ids = Object.entries(template.Resources)
        .filter(([id, resource]) => id.startsWith(prefix) && resource.Type === type)
        .map(([id]) => id);
      expect(ids, `${prefix} (${type})`).toHaveLength(1);
      return ids[0] ?? '';
    };

    const workQueue = idOf('LbWorkQueue', 'AWS::SQS::Queue');
    idOf('LbNodeQueue', 'AWS::SQS::Queue');
    const serviceSync = idOf('LbServiceSync', 'AWS::Lambda::Function');
    const functions = [serviceSync, idOf('LbNodeSync', 'AWS::Lambda::Function')];
    functions.push(idOf('LbSweep', 'AWS::Lambda::Function'));

    // service-sync consumes the work queue.
    const mappings = Object.values(template.Resources).filter(
      (resource) => resource.Type === 'AWS::Lambda::EventSourceMapping',
    );
    expect(mappings.map((mapping) => mapping.Properties)).toContainEqual(
      expect.objectContaining({
        FunctionName: { Ref: serviceSync },
        EventSourceArn: { 'Fn::GetAtt': [workQueue, 'Arn'] },
      }),
    );

    // Each function's asset is the project's own bundle (entry plus split chunks), which only
    // the afterBundling hook (infra/bundle-lambda.ts through tsx and esbuild) writes.
    for (const id of functions) {
      const code = template.Resources[id]?.Properties['Code'] as { S3Key: string };
      const asset = join(outdir, `asset.${code.S3Key.replace(/\.zip$/, '')}`);
      expect(existsSync(join(asset, 'index.mjs')), `${id} index.mjs`).toBe(true);
      expect(existsSync(join(asset, 'chunks')), `${id} chunks/`).toBe(true);
    }
  });
});
