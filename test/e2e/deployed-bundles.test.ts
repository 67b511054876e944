import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { App } from 'aws-cdk-lib';
import type { ScheduledEvent, SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig, type ControllerConfig } from '../../functions/contract/controller-config';
import { ownershipTags } from '../../functions/nlb/model/naming';
import { createApp } from '../../infra/app';
import { loadBalancerService } from '../support/kube-objects';
import { testRegion, type MotoAccount } from '../../kit/moto';
import { createRuntimeWorld, type RuntimeWorld } from '../support/runtime-world';

/**
 * Issue 17, item 8 ("Every log line should be JSON"): the bundles `cdk deploy` would upload, run
 * as Lambda runs them (their own Node 24 process, the function's environment from the template,
 * nothing of ours loaded beside them), write nothing that CloudWatch Logs Insights cannot parse.
 * In-process tests cannot show this: they replace the logger, and bundling changes what runs.
 */

const key = 'default/web';
const controllerFunctions = ['ServiceSync', 'NodeSync', 'Sweep'] as const;
type ControllerFunction = (typeof controllerFunctions)[number];

interface CfnResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
}
interface CfnTemplate {
  readonly Resources: Record<string, CfnResource>;
}

interface DeployedFunction {
  readonly logicalId: string;
  readonly bundle: string;
  readonly properties: Record<string, unknown>;
  readonly variables: Record<string, unknown>;
}

interface Run {
  readonly outcome: { node?: string; result?: unknown; error?: string };
  readonly stdout: string;
  readonly stderr: string;
}

let world: RuntimeWorld;
let template: CfnTemplate;
let functions: Record<ControllerFunction, DeployedFunction>;
let credentials: Record<string, string>;
let workDir: string;
let synthDir: string | undefined;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function logicalIdOf(type: string, prefix: string): string {
  const ids = Object.entries(template.Resources)
    .filter(([id, r]) => r.Type === type && new RegExp(`^${prefix}[0-9A-F]{8}$`).test(id))
    .map(([id]) => id);
  expect(ids, `one ${type} named ${prefix}… in the template`).toHaveLength(1);
  return ids[0]!;
}

/** The three controller functions of the template and the bundle each one deploys. */
function findFunctions(assemblyDir: string): Record<ControllerFunction, DeployedFunction> {
  const found = Object.entries(template.Resources).filter(
    ([, r]) => r.Type === 'AWS::Lambda::Function' && r.Properties?.Handler === 'index.handler',
  );
  const byName = Object.fromEntries(
    controllerFunctions.map((name) => {
      const matches = found.filter(([id]) => new RegExp(`^${name}[0-9A-F]{8}$`).test(id));
      expect(
        matches.map(([id]) => id),
        `one ${name} function`,
      ).toHaveLength(1);
      const [logicalId, resource] = matches[0]!;
      const properties = resource.Properties ?? {};
      const code = properties.Code;
      const s3Key = isRecord(code) ? code.S3Key : undefined;
      expect(s3Key, `${logicalId} Code.S3Key`).toMatch(/^[0-9a-f]{64}\.zip$/);
      const bundle = join(assemblyDir, `asset.${String(s3Key).replace(/\.zip$/, '')}`, 'index.mjs');
      expect(existsSync(bundle), `${logicalId}'s bundle`).toBe(true);
      const environment = properties.Environment;
      const variables = isRecord(environment) ? environment.Variables : undefined;
      if (!isRecord(variables)) throw new Error(`${logicalId} has no Environment.Variables`);
      return [name, { logicalId, bundle, properties, variables }];
    }),
  );
  return byName as Record<ControllerFunction, DeployedFunction>;
}

/**
 * What CloudFormation would put in CONTROLLER_CONFIG, with this test's resources in place of the
 * stack's: each token of the Fn::Join is resolved to the moto or fake-cluster resource playing
 * that part, and an unknown token fails (a new one must be given its stand-in here). Literal
 * fields are kept as synthesised; only the endpoints and the cluster connection are redirected.
 */
function controllerConfigFor(value: unknown): string {
  const stand = new Map<string, string | undefined>([
    [JSON.stringify({ Ref: 'AWS::Region' }), testRegion],
    [JSON.stringify({ Ref: logicalIdOf('AWS::SQS::Queue', 'WorkQueue') }), world.config.queueUrl],
    [
      JSON.stringify({ Ref: logicalIdOf('AWS::SQS::Queue', 'NodeQueue') }),
      world.config.nodeQueueUrl,
    ],
    [
      JSON.stringify({ Ref: logicalIdOf('AWS::SQS::Queue', 'DeadLetterQueue') }),
      world.config.deadLetterQueueUrl,
    ],
    [
      JSON.stringify({ Ref: logicalIdOf('AWS::DynamoDB::Table', 'StateTable') }),
      world.config.tableName,
    ],
    [
      JSON.stringify({
        'Fn::GetAtt': [logicalIdOf('AWS::EC2::SecurityGroup', 'BackendSecurityGroup'), 'GroupId'],
      }),
      world.config.aws.backendSecurityGroupId,
    ],
  ]);
  const joined = isRecord(value) ? value['Fn::Join'] : undefined;
  expect(Array.isArray(joined) && joined[0] === '' && Array.isArray(joined[1])).toBe(true);
  const parts = (joined as [string, unknown[]])[1];
  const text = parts
    .map((part) => {
      if (typeof part === 'string') return part;
      const resolved = stand.get(JSON.stringify(part));
      if (resolved === undefined) throw new Error(`no stand-in for ${JSON.stringify(part)}`);
      // Inside a JSON string literal of the template: escaped as JSON would escape it.
      return JSON.stringify(resolved).slice(1, -1);
    })
    .join('');
  const synthesised = JSON.parse(text) as ControllerConfig;
  const endpoint = world.account.config.endpoint;
  // Required<>: an endpoint added to the schema must be pointed at moto here too.
  const endpoints: Required<ControllerConfig['aws']['endpoints']> = {
    elbv2: endpoint,
    ec2: endpoint,
    tagging: endpoint,
    sqs: endpoint,
    dynamodb: endpoint,
    sts: endpoint,
    secretsManager: endpoint,
    eks: endpoint,
    events: endpoint,
  };
  const config = {
    ...synthesised,
    aws: { ...synthesised.aws, endpoints },
    kubernetes: world.config.kubernetes,
  };
  // The functions would refuse anything else; better to learn it here than from their logs.
  parseConfig(config);
  return JSON.stringify(config);
}

/**
 * Lambda's execution role, as moto models one: credentials from sts:AssumeRole of a role in the
 * test's private account make every call they sign land in that account, with no moto-specific
 * header (the bundles send none). moto does not check signatures, so the request is not signed.
 */
async function roleCredentials(account: MotoAccount): Promise<Record<string, string>> {
  const response = await fetch(account.config.endpoint, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      // moto routes by the service named in the credential scope.
      authorization: `AWS4-HMAC-SHA256 Credential=testing/20260101/${testRegion}/sts/aws4_request, SignedHeaders=host, Signature=0`,
    },
    body: new URLSearchParams({
      Action: 'AssumeRole',
      Version: '2011-06-15',
      RoleArn: `arn:aws:iam::${account.accountId}:role/FunctionsRole`,
      RoleSessionName: 'deployed-bundles',
    }),
  });
  const xml = await response.text();
  expect(response.status, xml).toBe(200);
  const field = (name: string) => {
    const value = new RegExp(`<${name}>([^<]+)</${name}>`).exec(xml)?.[1];
    if (value === undefined) throw new Error(`no ${name} in AssumeRole's answer: ${xml}`);
    return value;
  };
  return {
    AWS_ACCESS_KEY_ID: field('AccessKeyId'),
    AWS_SECRET_ACCESS_KEY: field('SecretAccessKey'),
    AWS_SESSION_TOKEN: field('SessionToken'),
  };
}

/** The function's environment: the template's variables and what Lambda itself sets, nothing else. */
function environmentOf(fn: DeployedFunction): Record<string, string> {
  const { properties } = fn;
  const loggingConfig = properties.LoggingConfig;
  const logFormat = isRecord(loggingConfig) ? loggingConfig.LogFormat : undefined;
  expect(logFormat, `${fn.logicalId} LoggingConfig.LogFormat`).toBe('JSON');
  const name = `${world.config.clusterName}-${fn.logicalId}`;
  const own = Object.fromEntries(
    Object.entries(fn.variables).map(([variable, value]) => {
      if (variable === 'CONTROLLER_CONFIG') return [variable, controllerConfigFor(value)];
      expect(typeof value, `${fn.logicalId} ${variable} is a literal`).toBe('string');
      return [variable, String(value)];
    }),
  );
  return {
    ...own,
    AWS_LAMBDA_FUNCTION_NAME: name,
    AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(properties.MemorySize),
    AWS_LAMBDA_LOG_FORMAT: String(logFormat),
    AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${name}`,
    AWS_LAMBDA_LOG_STREAM_NAME: `2026/01/01/[$LATEST]${randomUUID().replaceAll('-', '')}`,
    AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand',
    AWS_REGION: testRegion,
    AWS_DEFAULT_REGION: testRegion,
    AWS_EXECUTION_ENV: `AWS_Lambda_${String(properties.Runtime)}`,
    LAMBDA_TASK_ROOT: join(fn.bundle, '..'),
    _HANDLER: String(properties.Handler),
    TZ: ':UTC',
    LANG: 'en_US.UTF-8',
    ...credentials,
    // Not Lambda's, but keeps the SDK from reading this machine's ~/.aws files.
    HOME: workDir,
    PATH: process.env.PATH ?? '',
  };
}

/** Imports the bundle and calls its handler as the Node runtime does, then reports on one line. */
const driver = `
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
const [bundle, eventText, marker, timeoutSeconds] = process.argv.slice(2);
let outcome;
try {
  const { handler } = await import(pathToFileURL(bundle).href);
  const deadline = Date.now() + Number(timeoutSeconds) * 1000;
  const context = {
    callbackWaitsForEmptyEventLoop: true,
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    functionVersion: process.env.AWS_LAMBDA_FUNCTION_VERSION,
    invokedFunctionArn: 'arn:aws:lambda:' + process.env.AWS_REGION + ':000000000000:function:' + process.env.AWS_LAMBDA_FUNCTION_NAME,
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    awsRequestId: randomUUID(),
    logGroupName: process.env.AWS_LAMBDA_LOG_GROUP_NAME,
    logStreamName: process.env.AWS_LAMBDA_LOG_STREAM_NAME,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
  };
  outcome = { node: process.version, result: await handler(JSON.parse(eventText), context) };
} catch (error) {
  outcome = { node: process.version, error: error instanceof Error ? error.stack ?? error.message : String(error) };
}
process.stdout.write(marker + JSON.stringify(outcome) + '\\n');
// Lambda freezes the process here; open keep-alive sockets would keep this one waiting. The pause
// still catches lines written just after the handler returned.
setTimeout(() => process.exit(0), 300).unref();
`;

const marker = `deployed-bundles-result-${randomUUID()}:`;

async function invoke(name: ControllerFunction, event: unknown): Promise<Run> {
  const fn = functions[name];
  const driverFile = join(workDir, 'driver.mjs');
  const timeout = Number(fn.properties.Timeout);
  const child = spawn(
    process.execPath,
    [driverFile, fn.bundle, JSON.stringify(event), marker, String(timeout)],
    { cwd: join(fn.bundle, '..'), env: environmentOf(fn), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const killer = setTimeout(() => child.kill('SIGKILL'), 45_000);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  clearTimeout(killer);
  const resultLine = stdout.split('\n').find((line) => line.startsWith(marker));
  expect(
    resultLine,
    `${name} reported no result (exit ${code}):\n${stdout}\n${stderr}`,
  ).toBeDefined();
  const outcome = JSON.parse(resultLine!.slice(marker.length)) as Run['outcome'];
  expect(outcome.node, 'the Lambda runtime’s Node major').toMatch(/^v24\./);
  return { outcome, stdout, stderr };
}

const logsOf = (run: Run) => `logs:\n${run.stdout}${run.stderr}`;

/** Every line the function wrote that is not a JSON object, with the stream it went to. */
function nonJsonLines(run: Run): string[] {
  const offending: string[] = [];
  for (const [stream, text] of [
    ['stdout', run.stdout],
    ['stderr', run.stderr],
  ] as const) {
    for (const line of text.split('\n')) {
      if (line.trim() === '' || line.startsWith(marker)) continue;
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        parsed = undefined;
      }
      if (!isRecord(parsed)) offending.push(`${stream}: ${line}`);
    }
  }
  return offending;
}

function expectOnlyJson(name: ControllerFunction, run: Run): void {
  expect(nonJsonLines(run), `${name} wrote non-JSON log lines`).toEqual([]);
  // Guards against a capture that sees nothing: each run counts AWS calls, so EMF is printed.
  expect(run.stdout.split('\n').filter((line) => line.startsWith('{')).length).toBeGreaterThan(0);
}

function scheduledEvent(rulePrefix: string): ScheduledEvent {
  const rule = logicalIdOf('AWS::Events::Rule', rulePrefix);
  const targets = template.Resources[rule]?.Properties?.Targets;
  // With no Input on the target, EventBridge sends the scheduled event itself.
  expect(Array.isArray(targets) && targets.every((t) => isRecord(t) && !('Input' in t))).toBe(true);
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: world.account.accountId,
    time: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    region: testRegion,
    resources: [`arn:aws:events:${testRegion}:${world.account.accountId}:rule/${rule}`],
    detail: {},
  };
}

beforeAll(async () => {
  world = await createRuntimeWorld();
  workDir = mkdtempSync(join(tmpdir(), 'deployed-bundles-'));
  writeFileSync(join(workDir, 'driver.mjs'), driver);
  credentials = await roleCredentials(world.account);
  synthDir = mkdtempSync(join(tmpdir(), 'cdk-'));
  const app = new App({
    outdir: synthDir,
    // The cluster and VPC of the test, so those literals of the configuration are right as they are.
    context: {
      clusterName: world.config.clusterName,
      vpcId: world.config.aws.vpcId,
      nodeSecurityGroupIds: 'sg-0123456789abcdef0',
    },
  });
  const { stack } = createApp(app);
  const assembly = app.synth();
  template = assembly.getStackArtifact(stack.artifactId).template as CfnTemplate;
  functions = findFunctions(assembly.directory);
}, 120_000);

afterAll(async () => {
  await world?.stop();
  // Three 4 MB bundles a run: not worth keeping.
  for (const dir of [workDir, synthDir]) {
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
});

describe('the deployed bundles (issue 17, item 8: every log line is JSON)', () => {
  it('service-sync creates the NLB of a Service and logs only JSON', async () => {
    await world.api.createNamespacedService({
      namespace: 'default',
      body: {
        ...loadBalancerService('web'),
        spec: {
          ...loadBalancerService('web').spec,
          // As installed: the class is claimed, classless Services are not (claimClassless false).
          loadBalancerClass: world.config.loadBalancerClass,
        },
      },
    });
    await world.send({ v: 1, kind: 'service', key });
    const [record] = await world.receive(1);
    expect(record).toBeDefined();
    const event: SQSEvent = {
      Records: [
        {
          messageId: record!.messageId,
          receiptHandle: record!.receiptHandle,
          body: record!.body,
          attributes: {
            ApproximateReceiveCount: String(record!.receiveCount),
            SentTimestamp: String(Date.now()),
            SenderId: 'AROAEXAMPLE:forwarder',
            ApproximateFirstReceiveTimestamp: String(Date.now()),
          },
          messageAttributes: {},
          md5OfBody: '',
          eventSource: 'aws:sqs',
          eventSourceARN: `arn:aws:sqs:${testRegion}:${world.account.accountId}:${world.config.queueUrl.split('/').pop() ?? ''}`,
          awsRegion: testRegion,
        },
      ],
    };
    expect(JSON.parse(record!.body)).toEqual({ v: 1, kind: 'service', key });

    const run = await invoke('ServiceSync', event);
    expect(run.outcome.error, logsOf(run)).toBeUndefined();
    expect(run.outcome.result, logsOf(run)).toEqual({ batchItemFailures: [] });
    expectOnlyJson('ServiceSync', run);

    const elbv2 = world.aws.testClients.elbv2;
    const arns = (
      (await elbv2.send(new DescribeLoadBalancersCommand({}))).LoadBalancers ?? []
    ).flatMap((lb) => (lb.LoadBalancerArn ? [lb.LoadBalancerArn] : []));
    const tags = arns.length
      ? ((await elbv2.send(new DescribeTagsCommand({ ResourceArns: arns }))).TagDescriptions ?? [])
      : [];
    expect(
      tags.filter((t) =>
        (t.Tags ?? []).some((tag) => tag.Key === ownershipTags.service && tag.Value === key),
      ),
    ).toHaveLength(1);
  }, 60_000);

  it('node-sync runs its schedule and logs only JSON', async () => {
    const run = await invoke('NodeSync', scheduledEvent('NodeSyncSchedule'));
    expect(run.outcome.error, logsOf(run)).toBeUndefined();
    expectOnlyJson('NodeSync', run);
  }, 60_000);

  it('sweep runs its schedule and logs only JSON', async () => {
    const run = await invoke('Sweep', scheduledEvent('SweepSchedule'));
    expect(run.outcome.error, logsOf(run)).toBeUndefined();
    expectOnlyJson('Sweep', run);
  }, 60_000);
});
