import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import { cli, cliArgs, outputShows, startProcess as start } from '../support/cli-process';

/**
 * Local mode never reaches a real cluster by surprise (issue 35): only `--kubeconfig` selects one,
 * every option is checked before anything is created, and one embedded run at a time owns the
 * simulated cluster, from a directory of its own. "The real cluster" here is a fake API server
 * the test starts, whose request log shows whether the CLI ever called it.
 */
const endpoint = inject('awsEndpoint');
const aws = {
  region: 'us-east-1',
  endpoint,
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
};
const awsEnv = {
  AWS_ENDPOINT_URL: endpoint,
  AWS_ACCESS_KEY_ID: 'local',
  AWS_SECRET_ACCESS_KEY: 'local',
  AWS_REGION: 'us-east-1',
};

/** An embedded run of its own in the shared emulator: its cluster, queue and table names. */
function embeddedEnv(prefix: string) {
  const clusterName = `${prefix}-${Date.now().toString(36)}`;
  return {
    ...awsEnv,
    SSC_CLUSTER_NAME: clusterName,
    SSC_QUEUE_NAME: `${clusterName}-work`,
    SSC_TABLE_NAME: `${clusterName}-state`,
  };
}

const printedKubeconfig = (output: string) => /kubectl --kubeconfig (\S+)/.exec(output)?.[1];

describe('local mode never reaches a real cluster by surprise', () => {
  let real: FakeKubeApiServer;
  let realKubeconfig: string;

  beforeAll(async () => {
    real = await FakeKubeApiServer.start();
    realKubeconfig = join(mkdtempSync(join(tmpdir(), 'cli-safety-')), 'kubeconfig');
    writeFileSync(realKubeconfig, real.kubeconfigText());
  });

  afterAll(async () => {
    await real.stop();
  });

  it('with KUBECONFIG exported, npm start runs its own simulated cluster and never calls the exported one', async () => {
    const result = await cli(['--until-converged', '--timeout', '120'], {
      ...embeddedEnv('exported'),
      KUBECONFIG: realKubeconfig,
    });
    expect(result.code, result.output).toBe(0);
    expect(result.output).toContain(`KUBECONFIG is set (${realKubeconfig}) and left alone`);
    expect(printedKubeconfig(result.output)).not.toBe(realKubeconfig);
    expect(real.requests).toEqual([]);
  }, 150_000);

  it('the other commands ignore KUBECONFIG too: with no embedded run there is no cluster', async () => {
    const result = await cli(['delete', 'default/web'], { KUBECONFIG: realKubeconfig });
    expect(result.code, result.output).toBe(2);
    expect(result.output).toContain('no cluster: give --kubeconfig');
    expect(real.requests).toEqual([]);
  });

  it('real mode checks every option before it creates anything', async () => {
    const env = embeddedEnv('unchecked');
    // --create-resources, but no --vpc-id: the configuration is wrong.
    const result = await cli(
      [
        '--kubeconfig',
        realKubeconfig,
        '--cluster-name',
        env.SSC_CLUSTER_NAME,
        '--queue-name',
        env.SSC_QUEUE_NAME,
        '--table-name',
        env.SSC_TABLE_NAME,
        '--create-resources',
      ],
      awsEnv,
    );
    expect(result.code, result.output).toBe(2);
    expect(result.output).toContain('aws.vpcId');
    expect(result.output).toContain('Nothing was created');
    await expect(
      new SQSClient(aws).send(new GetQueueUrlCommand({ QueueName: env.SSC_QUEUE_NAME })),
    ).rejects.toThrow(/does not exist/i);
    await expect(
      new DynamoDBClient(aws).send(new DescribeTableCommand({ TableName: env.SSC_TABLE_NAME })),
    ).rejects.toThrow(/not found/i);
    expect(real.requests).toEqual([]);
  });

  it('a --kubeconfig that cannot be read is refused before anything starts', async () => {
    const result = await cli(['--kubeconfig', join(tmpdir(), 'no-such-kubeconfig')], awsEnv);
    expect(result.code, result.output).toBe(2);
    expect(result.output).toContain('not a readable kubeconfig');
    expect(result.output).not.toContain('Managing the cluster');
  });

  it('one embedded run at a time: a second is refused by name, a killed run is taken over, and each run has a directory of its own', async () => {
    const first = start(process.execPath, cliArgs, embeddedEnv('first'));
    let firstKubeconfig: string | undefined;
    try {
      await outputShows(first, /default\/hello +ready +3 /, 'the first run ready');
      firstKubeconfig = printedKubeconfig(first.output());
      const second = await cli(['--until-converged', '--timeout', '60'], embeddedEnv('second'));
      expect(second.code, second.output).toBe(2);
      expect(second.output).toContain(`another \`npm start\` (pid ${first.child.pid})`);
      expect(second.output).not.toContain('Starting the embedded default');
      // The other commands still find the first run's cluster, untouched by the second.
      const added = await cli(['node', 'add', '1']);
      expect(added.code, added.output).toBe(0);
      await outputShows(first, /default\/hello +ready +4 /, 'the first run following the node');
    } finally {
      // Killed: no clean-up runs, so its claim and directory are left behind.
      first.child.kill('SIGKILL');
      await first.closed;
    }
    expect(firstKubeconfig).toBeDefined();
    const third = await cli(['--until-converged', '--timeout', '120'], embeddedEnv('third'));
    expect(third.code, third.output).toBe(0);
    const thirdKubeconfig = printedKubeconfig(third.output);
    expect(thirdKubeconfig).toBeDefined();
    expect(thirdKubeconfig).not.toBe(firstKubeconfig);
    // The dead run's directory went with its stale claim; the third removed its own as it ended.
    expect(existsSync(firstKubeconfig ?? '')).toBe(false);
    expect(existsSync(thirdKubeconfig ?? '')).toBe(false);
    // And it gave its claim up: no embedded cluster is left for the other commands.
    const after = await cli(['delete', 'default/hello']);
    expect(after.code, after.output).toBe(2);
    expect(after.output).toContain('no cluster');
  }, 240_000);
});
