import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import { esbuildOptionsFor } from '../../infra/lambda-bundling';

const endpoint = inject('awsEndpoint');
const credentials = { accessKeyId: 'testing', secretAccessKey: 'testing' };

/** Imports the built probe in a fresh Node process (as Lambda would) and returns what it printed. */
function runProbe(entry: string, env: Record<string, string>): Promise<unknown> {
  const script = `const { probe } = await import(${JSON.stringify(pathToFileURL(entry).href)});
console.log('PROBE ' + JSON.stringify(await probe(${JSON.stringify(endpoint)})));`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const line = output.split('\n').find((l) => l.startsWith('PROBE '));
      if (code === 0 && line !== undefined) resolve(JSON.parse(line.slice('PROBE '.length)));
      else reject(new Error(`probe exited with ${code}:\n${output.slice(-3000)}`));
    });
  });
}

describe('a Lambda bundle built as deployed (issue 21: SDK schemas rewritten, code split)', () => {
  let dir: string;
  let kube: FakeKubeApiServer;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lambda-bundle-'));
    kube = await FakeKubeApiServer.start();
  });
  afterAll(async () => {
    await kube.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('makes EC2 calls through the rewritten schemas and loads the Secrets Manager chunk on demand', async () => {
    const { metafile } = await build({
      ...esbuildOptionsFor('test/fixtures/lambda-bundle/probe-entry.ts', dir),
      metafile: true,
      logLevel: 'error',
    });
    // The Secrets Manager client is in a chunk of its own, which the entry does not import.
    const entry = Object.entries(metafile.outputs).find(([file]) => file.endsWith('index.mjs'));
    const secretsChunk = Object.entries(metafile.outputs).find(([, output]) =>
      Object.keys(output.inputs).some((input) =>
        input.includes('@aws-sdk/client-secrets-manager/'),
      ),
    );
    expect(secretsChunk?.[0]).toMatch(/chunks[\\/]/);
    expect(
      entry?.[1].imports.some((i) => i.path === secretsChunk?.[0] && i.kind === 'import-statement'),
    ).toBe(false);
    expect(readdirSync(join(dir, 'chunks')).length).toBeGreaterThan(0);

    kube.store.create('nodes', '', { metadata: { name: 'node-a' } });
    const secrets = new SecretsManagerClient({ endpoint, region: 'us-east-1', credentials });
    const secret = await secrets.send(
      new CreateSecretCommand({
        Name: `kubeconfig-${randomUUID()}`,
        SecretString: kube.kubeconfigText(),
      }),
    );
    const config = {
      clusterName: 'bundle',
      region: 'us-east-1',
      queueUrl: 'http://127.0.0.1:1/000000000000/work',
      tableName: 'state',
      aws: { vpcId: 'vpc-0123456789abcdef0', endpoints: { secretsManager: endpoint } },
      // The fake API server speaks plain HTTP, which secret mode accepts only when told to.
      kubernetes: { mode: 'secret', secretArn: secret.ARN, allowInsecureConnection: true },
    };
    // Credentials from the environment, as in Lambda: the default chain is a chunk too.
    const result = (await runProbe(join(dir, 'index.mjs'), {
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      CONTROLLER_CONFIG: JSON.stringify(config),
    })) as { tags: Record<string, string>; nodes: string[] };
    // Tags go out through TagSpecification.N (ec2QueryName) and come back from tagSet/item
    // (xmlName): the traits whose keys the rewrite touched.
    expect(Object.values(result.tags)[0]).toMatch(/^bundle-probe-/);
    expect(Object.keys(result.tags)).toEqual(['probe']);
    expect(result.nodes).toEqual(['node-a']);
  }, 120_000);
});
