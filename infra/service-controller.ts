import { join } from 'node:path';
import { Annotations, CfnOutput, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { AttributeType, BillingMode, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { Peer, Port, Subnet, Vpc, type ISecurityGroup, type IVpc } from 'aws-cdk-lib/aws-ec2';
import { CfnAccessEntry } from 'aws-cdk-lib/aws-eks';
import { EventBus, Rule, Schedule, type IEventBus } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { Effect, PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, LoggingFormat, Runtime } from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { eventSourceMaxConcurrency } from '../functions/contract/queue-limits';
import {
  resendAfterReceives,
  workQueueBatchingWindowSeconds,
} from '../functions/contract/queue-limits';
import { packageRoot } from '../functions/package/package-root';
import { tenantPolicyWarnings } from '../functions/contract/tenant-policy-config';
import { controllerConfigFor, leaseSeconds, syncTimeoutSeconds } from './controller-config';
import { controllerPermissions } from './controller-permissions';
import { lambdaBundle, lambdaBundleHooks } from './lambda-bundling';
import { forwarderAccess, forwarderImage as forwarderImageFor } from './forwarder-access';
import { backendSecurityGroup, closedSecurityGroup } from './backend-security-group';
import { ControllerMonitoring } from './monitoring';
import { acknowledgeFunctionRoleWildcards } from './nag-acknowledgements';
import {
  settingsWithClusterDefaults,
  validatedConstructSettings,
  type ControllerCluster,
  type ServiceControllerSettings,
} from './service-controller-settings';
import type { ControllerSettings } from './settings-schema';

const root = packageRoot();

/** The Kubernetes group the functions' access entry maps to (bound in infra/k8s/controller-rbac.yaml). */
export const controllerGroup = 'serverless-service-controller';
export { forwarderNamespace, forwarderServiceAccount } from './forwarder-access';
/** How long one sync may run; the key's lease (`leaseSeconds`) outlasts it. */
const syncTimeout = Duration.seconds(syncTimeoutSeconds);
/**
 * How long one node-sync run may take: a Node list, the state reads and, for a small fan-out, the
 * host updates of a few Services, which are syncs like service-sync's (a dirty key's next pass is
 * a full sync, and each registration may wait for its slot on the shared budget): the same limit.
 */
const nodeSyncTimeout = syncTimeout;
/** AWS's rule for a queue a Lambda function consumes: a visibility timeout six times its timeout. */
const visibilityFor = (timeout: Duration) => Duration.seconds(timeout.toSeconds() * 6);

export interface ServiceControllerProps extends ServiceControllerSettings {
  /**
   * The EKS cluster to serve (an `ICluster` of `aws-eks` or `aws-eks-v2`). What is not set explicitly comes from it: `clusterName`, `vpcId`,
   * `clusterEndpoint` and `clusterCertificateAuthorityData` (so the functions need no
   * eks:DescribeCluster) and `nodeSecurityGroupIds` (its cluster security group, which managed
   * nodes carry). Without it, `clusterName` and `vpcId` are required.
   */
  readonly cluster?: ControllerCluster;
  /** The CloudWatch dashboard's name; by default the stack's name and this construct's id. */
  readonly dashboardName?: string;
}

/**
 * Everything the controller runs in AWS: the work and node queues and their DLQ, the state
 * table, the service-sync, node-sync and sweep functions and their schedules, least-privilege
 * roles, the cluster wiring (access entry, Pod Identity), the forwarder image, a dashboard and
 * alarms. Use it in a stack of your own (`new ServiceController(this, 'Lb', { cluster })`); the
 * standalone app (infra/app.ts) puts one in a stack of its own.
 */
export class ServiceController extends Construct {
  readonly settings: ControllerSettings;
  readonly queue: Queue;
  readonly nodeQueue: Queue;
  readonly deadLetterQueue: Queue;
  readonly table: Table;
  readonly functionsRole: Role;
  readonly functions: {
    readonly serviceSync: NodejsFunction;
    readonly nodeSync: NodejsFunction;
    readonly sweep: NodejsFunction;
  };
  /** What infra/k8s/config/controller.json holds (a JSON string, resolved at deploy). */
  readonly forwarderConfig: string;
  readonly monitoring: ControllerMonitoring;

  constructor(scope: Construct, id: string, props: ServiceControllerProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const settings = validatedConstructSettings(settingsWithClusterDefaults(props, props.cluster));
    this.settings = settings;
    // Valid, but fails open: said at every synth (cdk synth prints warnings; --strict fails on them).
    for (const warning of tenantPolicyWarnings(settings.tenantPolicy)) {
      Annotations.of(this).addWarningV2(
        'serverless-service-controller:tenantPolicyWithoutDefault',
        warning,
      );
    }

    const queues = this.queues();
    this.deadLetterQueue = queues.deadLetters;
    this.queue = queues.work;
    this.nodeQueue = queues.nodes;
    this.table = this.stateTable();

    // Only the VPC's ID is needed (security groups, function placement): the cluster's VPC when
    // one is given, else one imported by ID without a lookup, so the stack synthesises offline.
    const vpc =
      props.cluster !== undefined && props.vpcId === undefined
        ? props.cluster.vpc
        : Vpc.fromVpcAttributes(this, 'ClusterVpc', {
            vpcId: settings.vpcId,
            availabilityZones: stack.availabilityZones,
          });
    const backendGroup = backendSecurityGroup(this, vpc, settings);
    const functionPlacement = this.functionPlacement(vpc, settings);
    const eventBus = this.lifecycleEventBus(settings);

    const config = controllerConfigFor(settings, {
      region: stack.region,
      queueUrl: this.queue.queueUrl,
      nodeQueueUrl: this.nodeQueue.queueUrl,
      tableName: this.table.tableName,
      deadLetterQueueUrl: this.deadLetterQueue.queueUrl,
      backendSecurityGroupId: backendGroup?.securityGroupId,
      eventBusName: eventBus?.name,
      leaseSeconds,
    });
    const environment = {
      CONTROLLER_CONFIG: stack.toJsonString(config),
    };

    const functionsRole = new Role(this, 'FunctionsRole', {
      assumedBy: new ServicePrincipal('lambda.amazonaws.com'),
      description: 'serverless-service-controller service-sync, node-sync and sweep',
    });
    this.functionsRole = functionsRole;
    this.functions = this.controllerFunctions(
      settings,
      functionsRole,
      environment,
      functionPlacement,
    );
    this.grantFunctions(settings, functionsRole, functionPlacement, eventBus);
    forwarderAccess(this, settings, { work: this.queue, nodes: this.nodeQueue }, functionsRole);
    if (settings.kubernetesAllowInsecureConnection) {
      Annotations.of(this).addWarningV2(
        'serverless-service-controller:kubernetesAllowInsecureConnection',
        'kubernetesAllowInsecureConnection: the functions accept a kubeconfig whose server is plain HTTP or whose certificate is not verified; the bearer token can then be read or taken on the way (docs/tenant-safety.md#cluster-credentials)',
      );
    }

    const forwarderImage = forwarderImageFor(this, settings);
    this.monitoring = new ControllerMonitoring(this, 'Monitoring', {
      clusterName: settings.clusterName,
      dashboardName:
        props.dashboardName ?? `${stack.stackName}-${this.node.id}`.replace(/[^A-Za-z0-9_-]/g, '-'),
      queue: this.queue,
      nodeQueue: this.nodeQueue,
      deadLetterQueue: this.deadLetterQueue,
      functions: this.functions,
      sweepPeriodMinutes: Math.ceil(settings.sweepPeriodSeconds / 60),
      nodeBacklogAlarmSeconds:
        Math.max(settings.nodeSyncPeriodSeconds, visibilityFor(nodeSyncTimeout).toSeconds()) + 60,
      ...(settings.alarmTopicArn !== undefined ? { alarmTopicArn: settings.alarmTopicArn } : {}),
    });

    const forwarderConfig = {
      clusterName: settings.clusterName,
      region: stack.region,
      loadBalancerClass: settings.loadBalancerClass,
      claimClassless: settings.claimClassless,
      nodePolicy: settings.nodePolicy,
      queueUrl: this.queue.queueUrl,
      nodeQueueUrl: this.nodeQueue.queueUrl,
    };
    this.forwarderConfig = stack.toJsonString(forwarderConfig);
    this.outputs(forwarderImage, eventBus);
  }

  /** The work queue, the node queue and the dead-letter queue they share. */
  private queues(): { work: Queue; nodes: Queue; deadLetters: Queue } {
    const deadLetters = new Queue(this, 'DeadLetterQueue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    // Retries resend a fresh copy before this (functions/runtime/queue-records.ts), so only a
    // message that crashes the handler again and again reaches the DLQ this way; messages that
    // are not ours are moved there by the functions at once.
    const redrive = { queue: deadLetters, maxReceiveCount: resendAfterReceives + 2 };
    // A standard queue on purpose: a FIFO queue would serialise each message group. SQS runs it
    // as a fair queue because every send sets a MessageGroupId (functions/contract/work-message-group.ts);
    // no queue attribute is needed.
    const work = new Queue(this, 'WorkQueue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: visibilityFor(syncTimeout),
      retentionPeriod: Duration.days(4),
      deadLetterQueue: redrive,
    });
    // Node changes and the node-sync timer on a queue of their own, consumed by node-sync: a
    // backlog of Service work never delays a node change reaching the NLBs.
    const nodes = new Queue(this, 'NodeQueue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: visibilityFor(nodeSyncTimeout),
      retentionPeriod: Duration.days(4),
      deadLetterQueue: redrive,
    });

    return { work, nodes, deadLetters };
  }

  /** The state the upstream controller kept in memory (docs/design.md §3). */
  private stateTable(): Table {
    return new Table(this, 'StateTable', {
      partitionKey: { name: 'pk', type: AttributeType.STRING },
      billingMode: BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: TableEncryption.AWS_MANAGED,
      // Lifecycle events waiting for EventBridge (`evt#…` items) expire by themselves.
      timeToLiveAttribute: 'expiresAt',
      // The table holds the ARNs of live NLBs; losing it with the stack would strand them.
      removalPolicy: RemovalPolicy.RETAIN,
      // The same loss by hand (a stray delete-table, a cleanup script): deleting it now takes a
      // deliberate update-table first (README, Uninstall).
      deletionProtection: true,
    });
  }

  /** The three functions, their queues' event sources and their schedules. */
  private controllerFunctions(
    settings: ControllerSettings,
    functionsRole: Role,
    environment: Record<string, string>,
    functionPlacement: FunctionPlacement | undefined,
  ): ServiceController['functions'] {
    const serviceSync = this.controllerFunction('ServiceSync', 'service-sync', {
      environment,
      role: functionsRole,
      placement: functionPlacement,
      timeout: syncTimeout,
    });
    serviceSync.addEventSource(
      new SqsEventSource(this.queue, {
        batchSize: 10,
        maxBatchingWindow: Duration.seconds(workQueueBatchingWindowSeconds),
        reportBatchItemFailures: true,
        // The ELBv2 call budget, not Lambda's scaling, bounds how many syncs run at once.
        maxConcurrency: eventSourceMaxConcurrency(settings.elbv2CallsPerSecond),
      }),
    );
    // node-sync and sweep get reserved concurrency so that a burst of service-sync, or of other
    // functions in the account, cannot take the slot they need. The sweep is single-flight:
    // scheduled runs are at least five minutes apart against a timeout under two minutes, and a
    // second sweep finds its lease held and returns. The second slot is for Lambda's asynchronous
    // retry of a failed run (one and two minutes later), which can land beside the next scheduled
    // run; anything beyond is throttled and retried by Lambda. No more, as the account must keep
    // 100 unreserved.
    const singleFlightConcurrency = 2;
    // The node queue's mapping may run its minimum of 2 at once; Lambda's SQS guide asks for
    // reserved concurrency no lower than the mapping's maximum, and the schedule's tick takes a
    // third slot, so a tick never throttles a queue batch.
    const nodeQueueConcurrency = 2;
    const nodeSync = this.controllerFunction('NodeSync', 'node-sync', {
      environment,
      role: functionsRole,
      placement: functionPlacement,
      timeout: nodeSyncTimeout,
      reservedConcurrency: nodeQueueConcurrency + 1,
    });
    nodeSync.addEventSource(
      new SqsEventSource(this.nodeQueue, {
        batchSize: 10,
        // No batching window: node sync coalesces node messages itself, and every second of
        // waiting here is a second before a node change reaches the NLBs.
        reportBatchItemFailures: true,
        maxConcurrency: nodeQueueConcurrency,
      }),
    );
    const sweep = this.controllerFunction('Sweep', 'sweep', {
      environment,
      role: functionsRole,
      placement: functionPlacement,
      // Shorter than the sweep's lease (leaseSeconds), which it does not renew; what one pass
      // leaves is picked up by the next.
      timeout: Duration.seconds(syncTimeout.toSeconds() * 2 - 10),
      reservedConcurrency: singleFlightConcurrency,
    });

    // The node-sync period itself is a chain of delayed messages (docs/runtime.md); the
    // schedule only restarts the chain when it has stopped.
    new Rule(this, 'NodeSyncSchedule', {
      description: 'Keeps the node-sync timer chain alive',
      schedule: Schedule.rate(Duration.minutes(1)),
      targets: [new LambdaFunction(nodeSync, { retryAttempts: 0 })],
    });
    new Rule(this, 'SweepSchedule', {
      description: 'Drift repair, re-drive and orphan cleanup',
      schedule: Schedule.rate(Duration.minutes(Math.ceil(settings.sweepPeriodSeconds / 60))),
      targets: [new LambdaFunction(sweep, { retryAttempts: 0 })],
    });
    return { serviceSync, nodeSync, sweep };
  }

  /** What the functions may do: their queues and table, the bus, AWS, and the cluster. */
  private grantFunctions(
    settings: ControllerSettings,
    functionsRole: Role,
    functionPlacement: FunctionPlacement | undefined,
    eventBus: { name: string; bus: IEventBus } | undefined,
  ): void {
    const stack = Stack.of(this);
    acknowledgeFunctionRoleWildcards(functionsRole);
    if (functionPlacement !== undefined) {
      // What AWSLambdaVPCAccessExecutionRole grants, which CDK adds only to roles it creates.
      functionsRole.addToPrincipalPolicy(
        new PolicyStatement({
          sid: 'FunctionNetworkInterfaces',
          actions: [
            'ec2:CreateNetworkInterface',
            'ec2:DescribeNetworkInterfaces',
            'ec2:DescribeSubnets',
            'ec2:DeleteNetworkInterface',
            'ec2:AssignPrivateIpAddresses',
            'ec2:UnassignPrivateIpAddresses',
          ],
          resources: ['*'],
        }),
      );
    }
    this.table.grantReadWriteData(functionsRole);
    this.queue.grantSendMessages(functionsRole);
    // Node-sync ticks, and node messages an older forwarder still put on the work queue.
    this.nodeQueue.grantSendMessages(functionsRole);
    // Messages that are not ours are parked on the DLQ at once (docs/runtime.md).
    this.deadLetterQueue.grantSendMessages(functionsRole);
    // events:PutEvents on this one bus, nothing else.
    eventBus?.bus.grantPutEventsTo(functionsRole);
    for (const statement of controllerPermissions(stack, settings)) {
      functionsRole.addToPrincipalPolicy(statement);
    }
    if (settings.kubernetesSecretArn !== undefined) {
      functionsRole.addToPrincipalPolicy(
        new PolicyStatement({
          actions: ['secretsmanager:GetSecretValue'],
          resources: [settings.kubernetesSecretArn],
        }),
      );
      if (settings.kubernetesSecretKmsKeyArn !== undefined) {
        // Only for Secrets Manager's decryption of that secret, not for anything else the key holds.
        functionsRole.addToPrincipalPolicy(
          new PolicyStatement({
            actions: ['kms:Decrypt'],
            resources: [settings.kubernetesSecretKmsKeyArn],
            conditions: {
              StringEquals: { 'kms:ViaService': `secretsmanager.${stack.region}.amazonaws.com` },
            },
          }),
        );
      }
    } else {
      if (
        settings.clusterEndpoint === undefined ||
        settings.clusterCertificateAuthorityData === undefined
      ) {
        functionsRole.addToPrincipalPolicy(
          new PolicyStatement({
            actions: ['eks:DescribeCluster'],
            resources: [
              stack.formatArn({
                service: 'eks',
                resource: 'cluster',
                resourceName: settings.clusterName,
              }),
            ],
          }),
        );
      }
      // The functions reach the cluster as one Kubernetes group, bound to a narrow ClusterRole
      // (infra/k8s/controller-rbac.yaml).
      new CfnAccessEntry(this, 'FunctionsAccessEntry', {
        clusterName: settings.clusterName,
        principalArn: functionsRole.roleArn,
        kubernetesGroups: [controllerGroup],
        type: 'STANDARD',
      });
    }
  }

  /** The stack outputs the forwarder's manifests and the operator tooling read. */
  private outputs(
    forwarderImage: string | undefined,
    eventBus: { name: string; bus: IEventBus } | undefined,
  ): void {
    new CfnOutput(this, 'ForwarderConfig', {
      description:
        'the forwarder configuration: k8s render (npx serverless-service-controller k8s render --stack-outputs FILE --out DIR) writes it into config/controller.json',
      value: this.forwarderConfig,
    });
    if (forwarderImage !== undefined) {
      new CfnOutput(this, 'ForwarderImageUri', { value: forwarderImage });
    }
    new CfnOutput(this, 'WorkQueueUrl', { value: this.queue.queueUrl });
    new CfnOutput(this, 'NodeQueueUrl', { value: this.nodeQueue.queueUrl });
    new CfnOutput(this, 'DeadLetterQueueUrl', { value: this.deadLetterQueue.queueUrl });
    new CfnOutput(this, 'StateTableName', { value: this.table.tableName });
    if (eventBus !== undefined) {
      new CfnOutput(this, 'LifecycleEventBusName', {
        description: 'the bus lifecycle events go to (rules: source serverless-service-controller)',
        value: eventBus.name,
      });
      new CfnOutput(this, 'LifecycleEventBusArn', { value: eventBus.bus.eventBusArn });
    }
  }

  /**
   * The bus lifecycle events go to, if any: the account's default bus or one of our own. Its name
   * is returned as a literal (a token only when the cluster name is one), so the functions'
   * configuration stays plain JSON.
   */
  private lifecycleEventBus(
    settings: ControllerSettings,
  ): { readonly bus: IEventBus; readonly name: string } | undefined {
    switch (settings.lifecycleEventBus) {
      case 'off':
        return undefined;
      case 'default':
        return {
          bus: EventBus.fromEventBusName(this, 'DefaultEventBus', 'default'),
          name: 'default',
        };
      case 'create': {
        const name = `${settings.clusterName}-service-controller`;
        const bus = new EventBus(this, 'LifecycleEventBus', {
          eventBusName: name,
          description: `Load balancer lifecycle events of cluster ${settings.clusterName}`,
        });
        return { bus, name };
      }
    }
  }

  private controllerFunction(
    id: string,
    entry: string,
    options: {
      environment: Record<string, string>;
      role: Role;
      placement: FunctionPlacement | undefined;
      timeout: Duration;
      /**
       * None for service-sync: its event source mapping's MaximumConcurrency bounds it already,
       * and a reservation would hold that many executions away from the rest of the account.
       */
      reservedConcurrency?: number;
    },
  ): NodejsFunction {
    const logGroup = new LogGroup(this, `${id}Logs`, {
      retention: RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // Only the functions' own log groups: no AWSLambdaBasicExecutionRole (which allows every
    // log group in the account).
    options.role.addToPrincipalPolicy(
      new PolicyStatement({
        effect: Effect.ALLOW,
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [logGroup.logGroupArn],
      }),
    );
    return new NodejsFunction(this, id, {
      entry: join(root, 'functions', entry, 'handler.ts'),
      handler: 'handler',
      runtime: Runtime.NODEJS_24_X,
      architecture: Architecture.ARM_64,
      memorySize: 512,
      timeout: options.timeout,
      ...(options.reservedConcurrency !== undefined
        ? { reservedConcurrentExecutions: options.reservedConcurrency }
        : {}),
      role: options.role,
      logGroup,
      loggingFormat: LoggingFormat.JSON,
      environment: options.environment,
      ...(options.placement ?? {}),
      bundling: {
        format: OutputFormat.ESM,
        target: lambdaBundle.target,
        minify: lambdaBundle.minify,
        keepNames: lambdaBundle.keepNames,
        sourceMap: lambdaBundle.sourceMap,
        externalModules: [...lambdaBundle.externalModules],
        mainFields: [...lambdaBundle.mainFields],
        banner: lambdaBundle.banner,
        // esbuild is a pinned dev dependency: never fall back to Docker bundling.
        forceDockerBundling: false,
        // CDK's esbuild command line takes neither plugins nor code splitting: our build replaces it.
        commandHooks: lambdaBundleHooks(join(root, 'functions', entry, 'handler.ts')),
      },
    });
  }

  private functionPlacement(
    vpc: IVpc,
    settings: ControllerSettings,
  ): FunctionPlacement | undefined {
    if (settings.functionSubnetIds.length === 0) return undefined;
    const securityGroup = closedSecurityGroup(
      this,
      'FunctionSecurityGroup',
      vpc,
      'serverless-service-controller functions (to the cluster endpoint and AWS APIs)',
    );
    securityGroup.addEgressRule(
      Peer.anyIpv4(),
      Port.tcp(443),
      'HTTPS to the Kubernetes API and AWS',
    );
    return {
      vpc,
      vpcSubnets: {
        subnets: settings.functionSubnetIds.map((id, i) =>
          Subnet.fromSubnetId(this, `FnSubnet${i}`, id),
        ),
      },
      securityGroups: [securityGroup],
    };
  }
}

interface FunctionPlacement {
  readonly vpc: IVpc;
  readonly vpcSubnets: { subnets: ReturnType<typeof Subnet.fromSubnetId>[] };
  readonly securityGroups: ISecurityGroup[];
}
