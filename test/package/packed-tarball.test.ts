/**
 * What `npm pack` ships, and that it works once installed somewhere else, as the apps platform
 * teams start from: the tarball (built by `prepack`) goes into a stock `cdk init` TypeScript app
 * (CommonJS, `tsc` under NodeNext, run as compiled JavaScript: no TypeScript loader), a stock
 * `cdk init` JavaScript app (`require`), and an ES module app on the oldest aws-cdk-lib of the
 * peer range; each synthesises the construct, bundling the three functions from the installed
 * sources. The CLI runs from the installed package without the optional Kubernetes client, and
 * renders the forwarder's manifests with no checkout. Everything is installed from the local npm
 * cache (`npm ci` of this checkout fills it), as a user's `npm install` would fetch it.
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
interface Manifest {
  name: string;
  version: string;
  engines: Record<string, string>;
  exports: Record<string, unknown>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}
const manifest = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as Manifest;
const require = createRequire(import.meta.url);

/**
 * The CLI's Kubernetes client needs Node 22 or later. `npm test` runs on the pinned Node 24 (the
 * `node` dev dependency); a bare `npx vitest` may run on an older system Node, so fall back to the
 * pinned one there, as the bin shim does in this checkout.
 */
function modernNode(): string {
  if (Number(process.versions.node.split('.')[0]) >= 22) return process.execPath;
  return join(dirname(require.resolve('node/package.json')), 'bin', 'node');
}

/**
 * The children's environment: that Node first on PATH (npm, npx and the CLI run on it), and none
 * of the `npm_*` variables an enclosing `npm test` sets, which would point the nested npm at this
 * checkout instead of the temporary project.
 */
function childEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.toLowerCase().startsWith('npm_') && key !== 'INIT_CWD') env[key] = value;
  }
  env.PATH = [dirname(modernNode()), process.env.PATH ?? ''].join(delimiter);
  env.CDK_DISABLE_VERSION_CHECK = '1';
  return { ...env, ...extra };
}

async function sh(
  command: string,
  args: string[],
  cwd: string,
  extra: NodeJS.ProcessEnv = {},
): Promise<string> {
  const { stdout } = await run(command, args, {
    cwd,
    env: childEnv(extra),
    timeout: 200_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

/** A failing command's exit code and output, for the error paths. */
async function shFails(
  command: string,
  args: string[],
  cwd: string,
): Promise<{ code: number; output: string }> {
  try {
    await sh(command, args, cwd);
  } catch (error) {
    const failure = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failure.code ?? -1, output: `${failure.stdout ?? ''}${failure.stderr ?? ''}` };
  }
  throw new Error(`${command} ${args.join(' ')} succeeded`);
}

/** `npm install` from the cache, with the versions this checkout tests (or those given). */
async function install(dir: string, packages: string[]): Promise<void> {
  await sh('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', ...packages], dir);
}

const cdk = join(repoRoot, 'node_modules', '.bin', 'cdk');

/** The peer dependencies at the versions this checkout tests with. */
const testedPeers = [
  `aws-cdk-lib@${manifest.devDependencies['aws-cdk-lib']}`,
  `constructs@${manifest.devDependencies['constructs']}`,
];

/** `cdk init app --language LANG` as a user runs it, minus its `npm install` and `git init`. */
async function cdkInit(dir: string, language: 'typescript' | 'javascript'): Promise<void> {
  mkdirSync(dir, { recursive: true });
  await sh(cdk, ['init', 'app', '--language', language, '--generate-only', '--no-notices'], dir);
}

/**
 * The generated package.json's dependencies, reduced to what these tests install: its test
 * runner (jest, swc) and the CDK CLI are not in the local cache and take no part in a synth.
 */
function keepOnly(dir: string, devDependencies: Record<string, string>): void {
  const path = join(dir, 'package.json');
  const generated = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  writeFileSync(path, JSON.stringify({ ...generated, dependencies: {}, devDependencies }, null, 2));
  rmSync(join(dir, 'test'), { recursive: true, force: true });
  rmSync(join(dir, 'jest.config.js'), { force: true });
}

type Resource = { Type: string; Properties: Record<string, unknown> };

/**
 * The synthesised stack holds the controller: its queues, its three functions, each with the
 * project's own bundle (entry plus split chunks, which only its afterBundling step writes), and
 * service-sync consuming the work queue.
 */
function expectController(outdir: string, stackName: string): void {
  const template = JSON.parse(readFileSync(join(outdir, `${stackName}.template.json`), 'utf8')) as {
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
  const functions = [
    serviceSync,
    idOf('LbNodeSync', 'AWS::Lambda::Function'),
    idOf('LbSweep', 'AWS::Lambda::Function'),
  ];
  const mappings = Object.values(template.Resources).filter(
    (resource) => resource.Type === 'AWS::Lambda::EventSourceMapping',
  );
  expect(mappings.map((mapping) => mapping.Properties)).toContainEqual(
    expect.objectContaining({
      FunctionName: { Ref: serviceSync },
      EventSourceArn: { 'Fn::GetAtt': [workQueue, 'Arn'] },
    }),
  );
  for (const id of functions) {
    const code = template.Resources[id]?.Properties['Code'] as { S3Key: string };
    const asset = join(outdir, `asset.${code.S3Key.replace(/\.zip$/, '')}`);
    expect(existsSync(join(asset, 'index.mjs')), `${id} index.mjs`).toBe(true);
    expect(existsSync(join(asset, 'chunks')), `${id} chunks/`).toBe(true);
  }
}

/** The lower bound of the aws-cdk-lib peer range: the oldest release users may pair it with. */
function oldestCdkLib(): string {
  const range = manifest.peerDependencies['aws-cdk-lib'] ?? '';
  const floor = /^(?:\^|>=\s*)(\d+\.\d+\.\d+)/.exec(range)?.[1];
  if (floor === undefined) throw new Error(`aws-cdk-lib peer range ${range} has no lower bound`);
  return floor;
}

// A space in the path, as in a user's "My Projects": entry points and commands must quote and
// encode paths, not assume plain ones.
const work = mkdtempSync(join(tmpdir(), 'ssc package '));
let tarball = '';
let entries: string[] = [];
let packed: Manifest;

beforeAll(async () => {
  const result = JSON.parse(
    await sh('npm', ['pack', '--json', '--silent', '--pack-destination', work], repoRoot),
  ) as { filename: string }[];
  tarball = join(work, result[0]?.filename ?? '');
  // What the tarball really holds (npm nests everything under `package/`).
  entries = (await sh('tar', ['-tzf', tarball], work))
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => line.replace(/^package\//, ''));
  packed = JSON.parse(
    await sh('tar', ['-xzOf', tarball, 'package/package.json'], work),
  ) as Manifest;
});

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('the packed tarball', () => {
  it('holds the compiled construct and CLI, the functions sources, the manifests and the docs', () => {
    expect(tarball).toMatch(new RegExp(`${manifest.name}-${manifest.version}\\.tgz$`));
    expect(entries).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'CHANGELOG.md',
        'dist/index.js',
        'dist/index.cjs',
        'dist/index.d.ts',
        'dist/index.d.cts',
        'dist/bundle-lambda.js',
        'dist/cli/cli.js',
        'bin/serverless-service-controller.mjs',
        'functions/service-sync/handler.ts',
        'functions/node-sync/handler.ts',
        'functions/sweep/handler.ts',
        'functions/forwarder/main.ts',
        'infra/k8s/kustomization.yaml',
        'infra/k8s/deployment.yaml',
        'infra/k8s/controller-rbac.yaml',
        'docs/operations.md',
        'docs/upgrades.md',
        ...(existsSync(join(repoRoot, 'LICENSE')) ? ['LICENSE'] : []),
      ]),
    );
  });

  it('leaves out tests, benchmarks, build leftovers, the local mode and the CDK sources', () => {
    const unwanted = entries.filter(
      (path) =>
        /^(test|bench|scripts|\.ci|\.changeset|node_modules|cdk\.out|coverage|releases)\//.test(
          path,
        ) ||
        /(^|\/)node_modules\//.test(path) ||
        /\.test\.ts$/.test(path) ||
        path.startsWith('dist/.declarations/') ||
        // Compiled into dist/cli; the embedded cluster is not what a package user runs.
        path.startsWith('functions/local/') ||
        // Compiled into dist/; the manifests under infra/k8s ship as they are.
        /^infra\/[^/]+\.ts$/.test(path) ||
        // The forwarder bundle is built at render time, never shipped stale.
        path.startsWith('infra/k8s/code/'),
    );
    expect(unwanted).toEqual([]);
  });

  it('points its entry points at compiled JavaScript and carries no tool-only dependency', () => {
    expect(packed.exports['.']).toEqual({
      import: { types: './dist/index.d.ts', default: './dist/index.js' },
      require: { types: './dist/index.d.cts', default: './dist/index.cjs' },
    });
    const runtime = Object.keys(packed.dependencies);
    for (const name of ['@kubernetes/client-node', 'rfc6902', 'undici', 'tsx']) {
      expect(runtime, name).not.toContain(name);
    }
    expect(packed.peerDependenciesMeta?.['@kubernetes/client-node']?.optional).toBe(true);
    expect(packed.peerDependenciesMeta?.['rfc6902']?.optional).toBe(true);
    // The CLI's Kubernetes client and Vitest need Node 22: the package says so.
    expect(packed.engines['node']).toBe('>=22');
  });
});

describe('in a stock `cdk init` TypeScript app: CommonJS, tsc under NodeNext, no TypeScript loader', () => {
  const app = join(work, 'platform');

  beforeAll(async () => {
    await cdkInit(app, 'typescript');
    keepOnly(app, {});
    // The template's tsconfig names jest's types, which keepOnly leaves out with jest.
    const tsconfigPath = join(app, 'tsconfig.json');
    const tsconfig = JSON.parse(readFileSync(tsconfigPath, 'utf8')) as {
      compilerOptions: Record<string, unknown>;
    };
    expect(tsconfig.compilerOptions).toMatchObject({
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
    });
    tsconfig.compilerOptions['types'] = ['node'];
    writeFileSync(tsconfigPath, JSON.stringify(tsconfig, null, 2));
    // A concrete account and Region, as the template's own comment suggests.
    const bin = join(app, 'bin', 'platform.ts');
    writeFileSync(
      bin,
      readFileSync(bin, 'utf8').replace(
        "// env: { account: '123456789012', region: 'us-east-1' },",
        "env: { account: '123456789012', region: 'us-east-1' },",
      ),
    );
    // The user's stack, with an imported aws-eks-v2 cluster as the `cluster` prop.
    writeFileSync(
      join(app, 'lib', 'platform-stack.ts'),
      [
        "import * as cdk from 'aws-cdk-lib/core';",
        "import * as ec2 from 'aws-cdk-lib/aws-ec2';",
        "import * as eks from 'aws-cdk-lib/aws-eks-v2';",
        "import { Construct } from 'constructs';",
        "import { ServiceController } from 'serverless-service-controller';",
        '',
        'export class PlatformStack extends cdk.Stack {',
        '  constructor(scope: Construct, id: string, props?: cdk.StackProps) {',
        '    super(scope, id, props);',
        "    const vpc = ec2.Vpc.fromVpcAttributes(this, 'Vpc', {",
        "      vpcId: 'vpc-0123abcd',",
        "      availabilityZones: ['us-east-1a'],",
        '    });',
        "    const cluster = eks.Cluster.fromClusterAttributes(this, 'Cluster', {",
        "      clusterName: 'demo',",
        '      vpc,',
        "      clusterEndpoint: 'https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com',",
        "      clusterCertificateAuthorityData: 'LS0tLS1CRUdJTg==',",
        "      clusterSecurityGroupId: 'sg-0123456789abcdef0',",
        '    });',
        "    new ServiceController(this, 'Lb', { cluster, claimClassless: true });",
        '  }',
        '}',
        '',
      ].join('\n'),
    );
    await install(app, [
      tarball,
      ...testedPeers,
      `typescript@${manifest.devDependencies['typescript']}`,
      `@types/node@${manifest.devDependencies['@types/node']}`,
    ]);
  });

  it('installs a copy of its own, not a link back to this checkout', () => {
    const installed = realpathSync(join(app, 'node_modules', manifest.name));
    expect(installed.startsWith(realpathSync(repoRoot))).toBe(false);
    expect(existsSync(join(installed, 'test'))).toBe(false);
  });

  it('type-checks with the template’s own `npm run build` (tsc)', async () => {
    await sh('npm', ['run', 'build'], app);
  });

  it('synthesises from tsc’s JavaScript on plain Node, bundling the functions', async () => {
    await sh('npx', ['--no-install', 'tsc', '--noEmit', 'false', '--outDir', 'build'], app);
    const outdir = join(app, 'cdk.out');
    await sh(modernNode(), [join('build', 'bin', 'platform.js')], app, { CDK_OUTDIR: outdir });
    expectController(outdir, 'PlatformStack');
  });
});

describe('in a stock `cdk init` JavaScript app, without the optional Kubernetes client', () => {
  const app = join(work, 'js-platform');

  beforeAll(async () => {
    await cdkInit(app, 'javascript');
    keepOnly(app, {});
    writeFileSync(
      join(app, 'lib', 'js-platform-stack.js'),
      [
        "const { Stack } = require('aws-cdk-lib/core');",
        "const { ServiceController } = require('serverless-service-controller');",
        '',
        'class JsPlatformStack extends Stack {',
        '  constructor(scope, id, props) {',
        "    super(scope, id, { ...props, env: { account: '123456789012', region: 'eu-west-1' } });",
        "    new ServiceController(this, 'Lb', { clusterName: 'demo', vpcId: 'vpc-0123abcd' });",
        '  }',
        '}',
        '',
        'module.exports = { JsPlatformStack };',
        '',
      ].join('\n'),
    );
    await install(app, [tarball, ...testedPeers]);
  });

  it('synthesises through require()', async () => {
    const outdir = join(app, 'cdk.out');
    await sh(modernNode(), [join('bin', 'js-platform.js')], app, { CDK_OUTDIR: outdir });
    expectController(outdir, 'JsPlatformStack');
  });

  it('installs neither the Kubernetes client nor a TypeScript loader', () => {
    for (const name of ['@kubernetes/client-node', 'rfc6902', 'tsx', 'undici']) {
      expect(existsSync(join(app, 'node_modules', name)), name).toBe(false);
    }
  });

  it('runs the CLI: --help, and a cluster command names the package it needs', async () => {
    const usage = await sh('npx', ['--no-install', manifest.name, '--help'], app);
    expect(usage).toMatch(/^Usage:/m);
    expect(usage).toContain('serverless-service-controller k8s render');
    const missing = await shFails('npx', ['--no-install', manifest.name, 'delete', 'a/b'], app);
    expect(missing.code).toBe(2);
    expect(missing.output).toContain('npm install @kubernetes/client-node');
  });

  it('renders the forwarder manifests from the stack outputs alone, with no checkout', async () => {
    const config = {
      queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/work',
      nodeQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/nodes',
      region: 'eu-west-1',
      clusterName: 'demo',
    };
    writeFileSync(
      join(app, 'cdk-outputs.json'),
      JSON.stringify({ JsPlatformStack: { LbForwarderConfig0A1B2C3D: JSON.stringify(config) } }),
    );
    const out = join(app, 'gitops', 'demo');
    await sh(
      'npx',
      [
        '--no-install',
        manifest.name,
        'k8s',
        'render',
        '--stack-outputs',
        'cdk-outputs.json',
        '--out',
        out,
      ],
      app,
    );
    for (const file of ['kustomization.yaml', 'deployment.yaml', 'config/controller.json']) {
      expect(existsSync(join(out, file)), file).toBe(true);
    }
    const bundle = readFileSync(join(out, 'code', 'forwarder.mjs'), 'utf8');
    expect(bundle.length).toBeGreaterThan(10_000);
    expect(JSON.parse(readFileSync(join(out, 'config', 'controller.json'), 'utf8'))).toMatchObject(
      config,
    );
  });
});

describe('in an ES module app on the oldest aws-cdk-lib of the peer range', () => {
  const app = join(work, 'oldest');

  beforeAll(async () => {
    mkdirSync(app);
    writeFileSync(
      join(app, 'package.json'),
      JSON.stringify({ name: 'oldest', version: '0.0.0', private: true, type: 'module' }),
    );
    writeFileSync(
      join(app, 'app.js'),
      [
        "import { App, Stack } from 'aws-cdk-lib';",
        "import { ServiceController } from 'serverless-service-controller';",
        'const app = new App();',
        "const stack = new Stack(app, 'Oldest', {",
        "  env: { account: '123456789012', region: 'eu-west-1' },",
        '});',
        "new ServiceController(stack, 'Lb', { clusterName: 'demo', vpcId: 'vpc-0123abcd' });",
        'app.synth();',
        '',
      ].join('\n'),
    );
    await install(app, [
      tarball,
      `aws-cdk-lib@${oldestCdkLib()}`,
      `constructs@${manifest.devDependencies['constructs']}`,
    ]);
  });

  it('is the release this checkout keeps in its lockfile for this test', () => {
    // The alias puts the oldest release in the npm cache that `npm ci` fills, so this test
    // installs it offline.
    expect(manifest.devDependencies['aws-cdk-lib-oldest']).toBe(
      `npm:aws-cdk-lib@${oldestCdkLib()}`,
    );
    const installed = JSON.parse(
      readFileSync(join(app, 'node_modules', 'aws-cdk-lib', 'package.json'), 'utf8'),
    ) as { version: string };
    expect(installed.version).toBe(oldestCdkLib());
  });

  it('synthesises through import', async () => {
    const outdir = join(app, 'cdk.out');
    await sh(modernNode(), ['app.js'], app, { CDK_OUTDIR: outdir });
    expectController(outdir, 'Oldest');
  });
});
