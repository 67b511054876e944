import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig, loadAllYaml, type V1Service } from '@kubernetes/client-node';
import {
  controllerConfigSchema,
  parseConfig,
  type ControllerConfig,
} from '../contract/controller-config';
import { tenantPolicySchema, type TenantPolicySetting } from '../contract/tenant-policy-config';
import { finalizerFor } from '../core/claim';
import { excludeFromLoadBalancersLabel } from '../core/node-policy';
import type { RuntimeLog } from '../runtime/ports';
import { createRuntime } from '../wiring/wiring';
import {
  createSimulatedNetwork,
  ensureQueueAndTable,
  ensureTable,
  type AwsAccess,
} from './aws-resources';
import { FakeKubeApiServer, type Denial } from './fake-kube';
import { converged, LocalController, renderProgress } from './local-controller';
import { startMotoServer } from './moto-server';
import { loadProjectRbac } from './project-rbac';
import { planUninstall, uninstall } from './uninstall';
import { defaultQueueName, defaultTableName, UsageError } from './cli-usage';

const stateDir = join(tmpdir(), 'serverless-service-controller');
const embeddedStateFile = join(stateDir, 'embedded.json');

interface EmbeddedState {
  readonly kubeconfig: string;
  readonly aws: AwsAccess;
  readonly clusterName: string;
}

const sampleService: V1Service = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'hello', namespace: 'default' },
  spec: {
    type: 'LoadBalancer',
    loadBalancerClass: 'serverless-service-controller.io/nlb',
    selector: { app: 'hello' },
    ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
  },
};

const options = {
  help: { type: 'boolean', short: 'h' },
  kubeconfig: { type: 'string' },
  embedded: { type: 'boolean' },
  'allow-insecure-connection': { type: 'boolean' },
  rbac: { type: 'boolean' },
  'cluster-name': { type: 'string' },
  region: { type: 'string' },
  'vpc-id': { type: 'string' },
  'backend-security-group-id': { type: 'string' },
  'queue-name': { type: 'string' },
  'table-name': { type: 'string' },
  'load-balancer-class': { type: 'string' },
  'claim-classless': { type: 'boolean' },
  'node-policy': { type: 'string' },
  'tenant-policy': { type: 'string' },
  'create-resources': { type: 'boolean' },
  'lease-seconds': { type: 'string' },
  'until-converged': { type: 'boolean' },
  timeout: { type: 'string' },
  yes: { type: 'boolean' },
  file: { type: 'string', short: 'f' },
} as const;

type Flags = ReturnType<
  typeof parseArgs<{ options: typeof options; allowPositionals: true }>
>['values'];

function setting(flags: Flags, flag: keyof Flags, env: string): string | undefined {
  const value = flags[flag];
  if (typeof value === 'string') return value;
  if (value === true) return 'true';
  return process.env[env] || undefined;
}

const consoleLog: RuntimeLog = {
  info: () => undefined,
  warn: (message, fields) => console.error(`warn: ${message} ${JSON.stringify(fields ?? {})}`),
  error: (message, fields) => console.error(`error: ${message} ${JSON.stringify(fields ?? {})}`),
};

function controllerConfig(
  flags: Flags,
  aws: AwsAccess,
  resources: { queueUrl: string; tableName: string; deadLetterQueueUrl?: string },
  kubeconfig: string,
  defaults: { clusterName?: string; vpcId?: string; backendSecurityGroupId?: string },
): ControllerConfig {
  const endpoints = aws.endpoint
    ? Object.fromEntries(
        ['elbv2', 'ec2', 'tagging', 'sqs', 'dynamodb', 'sts', 'secretsManager', 'eks'].map((k) => [
          k,
          aws.endpoint,
        ]),
      )
    : {};
  const backend =
    setting(flags, 'backend-security-group-id', 'SSC_BACKEND_SECURITY_GROUP_ID') ??
    defaults.backendSecurityGroupId;
  const lbClass = setting(flags, 'load-balancer-class', 'SSC_LOAD_BALANCER_CLASS');
  const nodePolicy = setting(flags, 'node-policy', 'SSC_NODE_POLICY');
  const tenantPolicy = readTenantPolicy(flags);
  const leaseSeconds = readLeaseSeconds(flags);
  return parseConfig({
    clusterName: setting(flags, 'cluster-name', 'SSC_CLUSTER_NAME') ?? defaults.clusterName,
    region: aws.region,
    ...(lbClass ? { loadBalancerClass: lbClass } : {}),
    claimClassless: setting(flags, 'claim-classless', 'SSC_CLAIM_CLASSLESS') === 'true',
    ...(nodePolicy ? { nodePolicy } : {}),
    queueUrl: resources.queueUrl,
    tableName: resources.tableName,
    ...(resources.deadLetterQueueUrl ? { deadLetterQueueUrl: resources.deadLetterQueueUrl } : {}),
    ...(leaseSeconds !== undefined ? { leaseSeconds } : {}),
    aws: {
      vpcId: setting(flags, 'vpc-id', 'SSC_VPC_ID') ?? defaults.vpcId,
      ...(backend ? { backendSecurityGroupId: backend } : {}),
      endpoints,
    },
    kubernetes: {
      mode: 'kubeconfig',
      path: kubeconfig,
      ...(setting(flags, 'allow-insecure-connection', 'SSC_ALLOW_INSECURE_CONNECTION') === 'true'
        ? { allowInsecureConnection: true }
        : {}),
    },
    ...(tenantPolicy ? { tenantPolicy } : {}),
  });
}

/** The --tenant-policy file, checked as the controller will check it, before anything starts. */
function readTenantPolicy(flags: Flags): TenantPolicySetting | undefined {
  const path = setting(flags, 'tenant-policy', 'SSC_TENANT_POLICY');
  if (path === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new UsageError(
      `--tenant-policy ${path}: not a readable JSON file (${(error as Error).message})`,
    );
  }
  const result = tenantPolicySchema.safeParse(parsed);
  if (result.success) return result.data;
  const problems = result.error.issues.map(
    (issue) => `  - ${['tenantPolicy', ...issue.path].join('.')}: ${issue.message}`,
  );
  throw new UsageError(`--tenant-policy ${path}: invalid tenant policy:\n${problems.join('\n')}`);
}

/** --lease-seconds, checked by the configuration's own rule before anything starts. */
function readLeaseSeconds(flags: Flags): number | undefined {
  const text = setting(flags, 'lease-seconds', 'SSC_LEASE_SECONDS');
  if (text === undefined) return undefined;
  const result = controllerConfigSchema.shape.leaseSeconds.safeParse(Number(text));
  if (result.success) return result.data;
  throw new UsageError(
    `--lease-seconds ${text}: ${result.error.issues.map((i) => i.message).join('; ')}`,
  );
}

async function run(flags: Flags): Promise<number> {
  const kubeconfigFlag = setting(flags, 'kubeconfig', 'KUBECONFIG');
  const embedded = flags.embedded === true || kubeconfigFlag === undefined;
  const region =
    setting(flags, 'region', 'AWS_REGION') ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
  const timeoutSeconds = Number(setting(flags, 'timeout', 'SSC_TIMEOUT') ?? '300');
  const names = {
    queueName: setting(flags, 'queue-name', 'SSC_QUEUE_NAME') ?? defaultQueueName,
    tableName: setting(flags, 'table-name', 'SSC_TABLE_NAME') ?? defaultTableName,
  };
  const rbac = setting(flags, 'rbac', 'SSC_RBAC') === 'true';
  // A bad policy file or lease stops the run before an emulator or a cluster is started for nothing.
  readTenantPolicy(flags);
  readLeaseSeconds(flags);
  if (rbac && !embedded) {
    throw new UsageError(
      '--rbac applies to the embedded cluster; a real cluster enforces its own RBAC',
    );
  }
  const cleanups: (() => Promise<void>)[] = [];
  const cleanUp = async () => {
    for (const step of cleanups.reverse()) await step().catch(() => undefined);
  };
  try {
    let aws: AwsAccess;
    let kubeconfig: string;
    // Under --rbac, the functions and the forwarder each have their own identity's kubeconfig.
    let functionsKubeconfig: string | undefined;
    let forwarderKubeconfig: string | undefined;
    let denials: readonly Denial[] = [];
    let defaults: { clusterName?: string; vpcId?: string; backendSecurityGroupId?: string } = {};
    let create = setting(flags, 'create-resources', 'SSC_CREATE_RESOURCES') === 'true';
    if (embedded) {
      // An emulator already running (AWS_ENDPOINT_URL) is used as it is; else moto is started.
      let endpoint = process.env.AWS_ENDPOINT_URL || undefined;
      if (endpoint === undefined) {
        console.log('Starting the embedded default: a local AWS emulator and a simulated cluster…');
        const moto = await startMotoServer();
        cleanups.push(() => moto.stop());
        endpoint = moto.endpoint;
      } else {
        console.log(`Starting a simulated cluster against the AWS emulator at ${endpoint}…`);
      }
      aws = {
        region,
        endpoint,
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      };
      process.env.AWS_ACCESS_KEY_ID = 'local';
      process.env.AWS_SECRET_ACCESS_KEY = 'local';
      const project = rbac ? loadProjectRbac() : undefined;
      const kube = await FakeKubeApiServer.start(project ? { rbac: project.authorizer } : {});
      cleanups.push(() => kube.stop());
      mkdirSync(stateDir, { recursive: true });
      kubeconfig = join(stateDir, 'kubeconfig');
      writeFileSync(kubeconfig, kube.kubeconfigText());
      if (project !== undefined) {
        functionsKubeconfig = join(stateDir, 'functions.kubeconfig');
        writeFileSync(functionsKubeconfig, kube.kubeconfigText({ as: project.functions }));
        forwarderKubeconfig = join(stateDir, 'forwarder.kubeconfig');
        writeFileSync(forwarderKubeconfig, kube.kubeconfigText({ as: project.forwarder }));
        denials = kube.denials;
        console.log(
          `RBAC of infra/k8s enforced: the functions run as ${project.functions.name} ` +
            `(groups ${project.functions.groups.join(', ')}), the forwarder as ` +
            `${project.forwarder.name}; kubectl and the CLI's commands act as the admin.`,
        );
      }
      const clusterName = setting(flags, 'cluster-name', 'SSC_CLUSTER_NAME') ?? 'local';
      const network = await createSimulatedNetwork(aws, clusterName);
      for (const node of await network.addInstances(3)) {
        kube.store.create('nodes', '', {
          metadata: { name: node.name },
          spec: { providerID: node.providerID },
          status: { conditions: [{ type: 'Ready', status: 'True' }] },
        });
      }
      kube.store.create('services', 'default', sampleService as never);
      defaults = {
        clusterName,
        vpcId: network.vpcId,
        backendSecurityGroupId: network.backendSecurityGroupId,
      };
      create = true;
      const state: EmbeddedState = { kubeconfig, aws, clusterName };
      writeFileSync(embeddedStateFile, JSON.stringify(state));
      console.log(`Simulated cluster: kubectl --kubeconfig ${kubeconfig} get services -A`);
      console.log(`AWS emulator:      AWS_ENDPOINT_URL=${endpoint} (any credentials)`);
    } else {
      kubeconfig = kubeconfigFlag;
      const endpoint = process.env.AWS_ENDPOINT_URL || undefined;
      aws = { region, ...(endpoint ? { endpoint } : {}) };
      console.log(
        `Managing the cluster in ${kubeconfig}${endpoint ? ` with AWS at ${endpoint}` : ''}`,
      );
    }
    const resources = await ensureQueueAndTable(aws, names, create);
    const config = controllerConfig(
      flags,
      aws,
      resources,
      functionsKubeconfig ?? kubeconfig,
      defaults,
    );
    const controller = new LocalController(
      config,
      kubeconfig,
      aws,
      consoleLog,
      forwarderKubeconfig === undefined ? {} : { forwarderKubeconfig },
    );
    controller.start();
    cleanups.push(() => controller.stop());

    let stopping = false;
    const stopped = new Promise<void>((resolve) => {
      for (const signal of ['SIGINT', 'SIGTERM'] as const) {
        process.once(signal, () => {
          stopping = true;
          console.log('\nStopping…');
          resolve();
        });
      }
    });
    const deadline = Date.now() + timeoutSeconds * 1000;
    let shown = '';
    let reported = 0;
    /** Prints refusals not yet shown; true when a run waiting for convergence must fail. */
    const refused = (): boolean => {
      for (const denial of denials.slice(reported)) {
        console.error(`rbac: refused ${denial.method} ${denial.request.path}: ${denial.message}`);
      }
      reported = denials.length;
      // A refusal means the manifests lack a permission, whatever the progress shows.
      if (flags['until-converged'] && reported > 0) {
        console.error(
          'Not converged: the API server refused requests under the RBAC of infra/k8s.',
        );
        return true;
      }
      return false;
    };
    while (!stopping) {
      if (refused()) return 1;
      const rows = await controller.progress().catch((error: unknown) => {
        console.error(`progress: ${String(error)}`);
        return undefined;
      });
      if (rows !== undefined) {
        const text = renderProgress(rows);
        if (text !== shown) {
          console.log(`\n${new Date().toISOString()}\n${text}`);
          shown = text;
        }
        if (flags['until-converged'] && converged(rows)) {
          if (refused()) return 1;
          console.log('Converged: every LoadBalancer Service has its NLB, targets and status.');
          return 0;
        }
      }
      if (flags['until-converged'] && Date.now() > deadline) {
        console.error(
          `Not converged after ${timeoutSeconds} s: ${(rows ?? [])
            .filter((r) => r.phase !== 'ready')
            .map((r) => `${r.service} is ${r.phase}`)
            .join(', ')}`,
        );
        return 1;
      }
      await Promise.race([stopped, new Promise((resolve) => setTimeout(resolve, 1000))]);
    }
    return 0;
  } finally {
    await cleanUp();
  }
}

function embeddedState(): EmbeddedState | undefined {
  try {
    return JSON.parse(readFileSync(embeddedStateFile, 'utf8')) as EmbeddedState;
  } catch {
    return undefined;
  }
}

function kubeApi(flags: Flags): CoreV1Api {
  const path = setting(flags, 'kubeconfig', 'KUBECONFIG') ?? embeddedState()?.kubeconfig;
  if (path === undefined)
    throw new UsageError('no cluster: give --kubeconfig or start `npm start` first');
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc.makeApiClient(CoreV1Api);
}

async function apply(flags: Flags): Promise<number> {
  if (flags.file === undefined) throw new UsageError('apply needs -f FILE');
  const api = kubeApi(flags);
  for (const doc of loadAllYaml(readFileSync(flags.file, 'utf8')) as V1Service[]) {
    if (doc.kind !== 'Service')
      throw new UsageError(`only Services can be applied, not ${doc.kind}`);
    const namespace = doc.metadata?.namespace ?? 'default';
    const name = doc.metadata?.name ?? '';
    const existing = await api.readNamespacedService({ name, namespace }).catch(() => undefined);
    if (existing === undefined) {
      await api.createNamespacedService({ namespace, body: doc });
      console.log(`service/${namespace}/${name} created`);
    } else {
      const body = {
        ...doc,
        metadata: { ...doc.metadata, resourceVersion: existing.metadata?.resourceVersion },
      };
      body.spec = { ...doc.spec, clusterIP: existing.spec?.clusterIP };
      await api.replaceNamespacedService({ name, namespace, body });
      console.log(`service/${namespace}/${name} configured`);
    }
  }
  return 0;
}

async function node(flags: Flags, args: string[]): Promise<number> {
  const [action, target] = args;
  const api = kubeApi(flags);
  if (action === 'add') {
    const state = embeddedState();
    if (state === undefined) throw new UsageError('node add works on the embedded cluster only');
    const network = await createSimulatedNetwork(state.aws, state.clusterName);
    for (const added of await network.addInstances(Number(target ?? '1'))) {
      const name = `${added.name}-${added.providerID.slice(-6)}`;
      await api.createNode({
        body: {
          metadata: { name },
          spec: { providerID: added.providerID },
          status: { conditions: [{ type: 'Ready', status: 'True' }] },
        },
      });
      console.log(`node/${name} added (${added.providerID})`);
    }
    return 0;
  }
  if (target === undefined) throw new UsageError(`node ${action ?? ''} needs a node name`);
  if (action === 'remove') {
    await api.deleteNode({ name: target });
    console.log(`node/${target} removed`);
    return 0;
  }
  if (action === 'exclude' || action === 'include') {
    const existing = await api.readNode({ name: target });
    const labels = { ...existing.metadata?.labels };
    if (action === 'exclude') labels[excludeFromLoadBalancersLabel] = '';
    else delete labels[excludeFromLoadBalancersLabel];
    await api.replaceNode({
      name: target,
      body: { ...existing, metadata: { ...existing.metadata, labels } },
    });
    console.log(
      `node/${target} ${action === 'exclude' ? 'excluded from' : 'included in'} load balancers`,
    );
    return 0;
  }
  throw new UsageError(`unknown node action ${action ?? ''}`);
}

async function uninstallCommand(flags: Flags): Promise<number> {
  const state = embeddedState();
  const kubeconfig = setting(flags, 'kubeconfig', 'KUBECONFIG') ?? state?.kubeconfig;
  if (kubeconfig === undefined) throw new UsageError('uninstall needs --kubeconfig');
  const region =
    setting(flags, 'region', 'AWS_REGION') ??
    process.env.AWS_DEFAULT_REGION ??
    state?.aws.region ??
    'us-east-1';
  const endpoint =
    process.env.AWS_ENDPOINT_URL ??
    (kubeconfig === state?.kubeconfig ? state.aws.endpoint : undefined);
  const aws: AwsAccess = {
    region,
    ...(endpoint ? { endpoint } : {}),
    ...(kubeconfig === state?.kubeconfig && state.aws.credentials
      ? { credentials: state.aws.credentials }
      : {}),
  };
  // Uninstall needs the state table (the ARNs it recorded) but never the queue: after a CDK
  // deploy, pass the StateTableName output.
  const tableName = setting(flags, 'table-name', 'SSC_TABLE_NAME') ?? defaultTableName;
  await ensureTable(aws, tableName, false);
  const resources = {
    queueUrl: `https://sqs.${region}.amazonaws.com/000000000000/unused-by-uninstall`,
    tableName,
  };
  const config = controllerConfig(flags, aws, resources, kubeconfig, {
    ...(kubeconfig === state?.kubeconfig
      ? { clusterName: state.clusterName, vpcId: 'vpc-00000000' }
      : {}),
  });
  const ctx = createRuntime(config, {
    log: consoleLog,
    ...(aws.credentials ? { credentials: aws.credentials } : {}),
  });
  const plan = await planUninstall(ctx, kubeconfig);
  console.log(`Load balancer resources of cluster ${config.clusterName}, by owning Service:`);
  for (const [uid, key] of plan.owners) console.log(`  ${key} (uid ${uid})`);
  if (plan.owners.size === 0) console.log('  (none)');
  console.log(`Services holding the finalizer ${finalizerFor(config)}:`);
  for (const key of plan.finalized) console.log(`  ${key}`);
  if (plan.finalized.length === 0) console.log('  (none)');
  if (!flags.yes) {
    console.log(
      'Dry run: nothing changed. Stop the forwarder, then run again with --yes to delete.',
    );
    return 0;
  }
  await uninstall(ctx, kubeconfig, (line) => console.log(line));
  console.log(
    'Uninstalled: no load balancer resources and no finalizers of this controller remain.',
  );
  return 0;
}

export async function main(argv: readonly string[]): Promise<number> {
  const parsed = parseArgs({ args: [...argv], options, allowPositionals: true, strict: true });
  const flags = parsed.values;
  const [command = 'run', ...rest] = parsed.positionals;
  switch (command) {
    case 'run':
      return run(flags);
    case 'apply':
      return apply(flags);
    case 'delete': {
      const [namespace = '', name = ''] = (rest[0] ?? '').split('/');
      if (name === '') throw new UsageError('delete needs NAMESPACE/NAME');
      await kubeApi(flags).deleteNamespacedService({ name, namespace });
      console.log(`service/${namespace}/${name} deleted`);
      return 0;
    }
    case 'node':
      return node(flags, rest);
    case 'uninstall':
      return uninstallCommand(flags);
    default:
      throw new UsageError(`unknown command ${command}`);
  }
}
