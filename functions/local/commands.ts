import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig, loadAllYaml, type V1Service } from '@kubernetes/client-node';
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
import { claimEmbeddedRun, liveEmbeddedState } from './embedded-run';
import { FakeKubeApiServer, type Denial } from './fake-kube';
import { converged, LocalController, renderProgress } from './local-controller';
import { startMotoServer } from './moto-server';
import { loadProjectRbac } from './project-rbac';
import { pod } from './pod-commands';
import { planUninstall, uninstall } from './uninstall';
import { defaultQueueName, defaultTableName, UsageError } from './cli-usage';
import {
  checkConfiguration,
  controllerConfig,
  explicitKubeconfig,
  options,
  readableKubeconfig,
  readLeaseSeconds,
  readTenantPolicy,
  setting,
  type Flags,
} from './cli-options';

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

const consoleLog: RuntimeLog = {
  info: () => undefined,
  warn: (message, fields) => console.error(`warn: ${message} ${JSON.stringify(fields ?? {})}`),
  error: (message, fields) => console.error(`error: ${message} ${JSON.stringify(fields ?? {})}`),
};

async function run(flags: Flags): Promise<number> {
  const kubeconfigFlag = explicitKubeconfig(flags);
  if (flags.embedded === true && kubeconfigFlag !== undefined) {
    throw new UsageError(
      '--embedded runs the simulated cluster: give it or --kubeconfig, not both',
    );
  }
  const embedded = kubeconfigFlag === undefined;
  if (embedded && process.env.KUBECONFIG) {
    console.log(
      `KUBECONFIG is set (${process.env.KUBECONFIG}) and left alone: local mode runs its own ` +
        'simulated cluster; pass --kubeconfig to manage a real one.',
    );
  }
  const region =
    setting(flags, 'region', 'AWS_REGION') ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
  const timeoutText = setting(flags, 'timeout', 'SSC_TIMEOUT') ?? '300';
  const timeoutSeconds = Number(timeoutText);
  if (!Number.isFinite(timeoutSeconds) || timeoutSeconds <= 0) {
    throw new UsageError(`--timeout ${timeoutText}: a number of seconds above 0`);
  }
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
  // The options that make the configuration, the AWS endpoint and the kubeconfig are checked
  // before an emulator, a cluster, a queue or a table exists. The
  // embedded run's own network stands in for the VPC and backend group it will create.
  if (kubeconfigFlag !== undefined && !embedded) readableKubeconfig(kubeconfigFlag);
  checkConfiguration(
    flags,
    { region, ...(process.env.AWS_ENDPOINT_URL ? { endpoint: process.env.AWS_ENDPOINT_URL } : {}) },
    names,
    kubeconfigFlag ?? 'embedded.kubeconfig',
    embedded
      ? {
          clusterName: setting(flags, 'cluster-name', 'SSC_CLUSTER_NAME') ?? 'local',
          vpcId: 'vpc-0123456789abcdef0',
          backendSecurityGroupId: 'sg-0123456789abcdef0',
        }
      : {},
  );
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
      const claim = claimEmbeddedRun();
      cleanups.push(() => Promise.resolve(claim.release()));
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
      kubeconfig = join(claim.dir, 'kubeconfig');
      writeFileSync(kubeconfig, kube.kubeconfigText(), { mode: 0o600 });
      if (project !== undefined) {
        functionsKubeconfig = join(claim.dir, 'functions.kubeconfig');
        writeFileSync(functionsKubeconfig, kube.kubeconfigText({ as: project.functions }), {
          mode: 0o600,
        });
        forwarderKubeconfig = join(claim.dir, 'forwarder.kubeconfig');
        writeFileSync(forwarderKubeconfig, kube.kubeconfigText({ as: project.forwarder }), {
          mode: 0o600,
        });
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
      claim.publish({ kubeconfig, aws, clusterName });
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

function kubeApi(flags: Flags): CoreV1Api {
  const path = explicitKubeconfig(flags) ?? liveEmbeddedState()?.kubeconfig;
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
    const state = liveEmbeddedState();
    if (state === undefined) throw new UsageError('node add works on the embedded cluster only');
    // Its nodes are instances of the embedded run's emulator: never Nodes of another cluster.
    const given = explicitKubeconfig(flags);
    if (given !== undefined && given !== state.kubeconfig) {
      throw new UsageError(
        `node add adds simulated nodes to the embedded cluster only (${state.kubeconfig}), not to --kubeconfig ${given}`,
      );
    }
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
  const state = liveEmbeddedState();
  const kubeconfig = explicitKubeconfig(flags) ?? state?.kubeconfig;
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
    case 'pod':
      return pod(flags, rest);
    case 'uninstall':
      return uninstallCommand(flags);
    default:
      throw new UsageError(`unknown command ${command}`);
  }
}
