import { join } from 'node:path';
import { Annotations, CfnOutput, Duration, RemovalPolicy, Stack, Token } from 'aws-cdk-lib';
import { AttributeType, BillingMode, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import {
  Peer,
  Port,
  SecurityGroup,
  Subnet,
  Vpc,
  CfnSecurityGroupEgress,
  CfnSecurityGroupIngress,
  type ISecurityGroup,
  type IVpc,
} from 'aws-cdk-lib/aws-ec2';
import { Platform, DockerImageAsset } from 'aws-cdk-lib/aws-ecr-assets';
import { CfnAccessEntry, CfnPodIdentityAssociation } from 'aws-cdk-lib/aws-eks';
import { EventBus, Rule, Schedule, type IEventBus } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import {
  AnyPrincipal,
  Effect,
  ManagedPolicy,
  PolicyStatement,
  Role,
  ServicePrincipal,
  SessionTagsPrincipal,
  WebIdentityPrincipal,
} from 'aws-cdk-lib/aws-iam';
import { Architecture, LoggingFormat, Runtime } from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import {
  AwsCustomResource,
  AwsCustomResourcePolicy,
  PhysicalResourceId,
} from 'aws-cdk-lib/custom-resources';
import { Construct } from 'constructs';
import { eventSourceMaxConcurrency } from '../functions/contract/queue-limits';
import { resendAfterReceives } from '../functions/contract/queue-limits';
import { packageRoot } from '../functions/package/package-root';
import { tenantPolicyWarnings } from '../functions/contract/tenant-policy-config';
import { controllerConfigFor, leaseSeconds, syncTimeoutSeconds } from './controller-config';
import { controllerPermissions } from './controller-permissions';
import { lambdaBundle, lambdaBundleHooks } from './lambda-bundling';
import { ControllerMonitoring } from './monitoring';
import {
  acknowledgeFunctionRoleWildcards,
  acknowledgeLookupFunction,
} from './nag-acknowledgements';
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
/** Where the forwarder runs (infra/k8s). */
export const forwarderNamespace = 'serverless-service-controller';
export const forwarderServiceAccount = 'forwarder';

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

    const deadLetters = new Queue(this, 'DeadLetterQueue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    this.deadLetterQueue = deadLetters;
    // Retries resend a fresh copy before this (functions/runtime/queue-records.ts), so only a
    // message that crashes the handler again and again reaches the DLQ this way; messages that
    // are not ours are moved there by the functions at once.
    const redrive = { queue: deadLetters, maxReceiveCount: resendAfterReceives + 2 };
    // A standard queue on purpose: a FIFO queue would serialise each message group. SQS runs it
    // as a fair queue because every send sets a MessageGroupId (functions/contract/work-message-group.ts);
    // no queue attribute is needed.
    this.queue = new Queue(this, 'WorkQueue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: visibilityFor(syncTimeout),
      retentionPeriod: Duration.days(4),
      deadLetterQueue: redrive,
    });
    // Node changes and the node-sync timer on a queue of their own, consumed by node-sync: a
    // backlog of Service work never delays a node change reaching the NLBs.
    this.nodeQueue = new Queue(this, 'NodeQueue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: visibilityFor(nodeSyncTimeout),
      retentionPeriod: Duration.days(4),
      deadLetterQueue: redrive,
    });

    this.table = new Table(this, 'StateTable', {
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

    // Only the VPC's ID is needed (security groups, function placement): the cluster's VPC when
    // one is given, else one imported by ID without a lookup, so the stack synthesises offline.
    const vpc =
      props.cluster !== undefined && props.vpcId === undefined
        ? props.cluster.vpc
        : Vpc.fromVpcAttributes(this, 'ClusterVpc', {
            vpcId: settings.vpcId,
            availabilityZones: stack.availabilityZones,
          });
    const backendGroup = this.backendSecurityGroup(vpc, settings);
    const functionPlacement = this.functionPlacement(vpc, settings);
    const eventBus = this.lifecycleEventBus(settings);

    const config = controllerConfigFor(settings, {
      region: stack.region,
      queueUrl: this.queue.queueUrl,
      nodeQueueUrl: this.nodeQueue.queueUrl,
      tableName: this.table.tableName,
      deadLetterQueueUrl: deadLetters.queueUrl,
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
    const serviceSync = this.controllerFunction('ServiceSync', 'service-sync', {
      environment,
      role: functionsRole,
      placement: functionPlacement,
      timeout: syncTimeout,
    });
    serviceSync.addEventSource(
      new SqsEventSource(this.queue, {
        batchSize: 10,
        maxBatchingWindow: Duration.seconds(1),
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
    deadLetters.grantSendMessages(functionsRole);
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

    // Send only: not even GetQueueAttributes, which grantSendMessages would add. Service changes
    // go to the work queue, Node changes to the node queue.
    const sendOnly = new PolicyStatement({
      actions: ['sqs:SendMessage'],
      resources: [this.queue.queueArn, this.nodeQueue.queueArn],
    });
    const forwarderRole = this.forwarderRole(settings);
    if (forwarderRole !== undefined) {
      forwarderRole.addToPrincipalPolicy(sendOnly);
      new CfnOutput(this, 'ForwarderRoleArn', { value: forwarderRole.roleArn });
    } else {
      // Outside EKS: a policy to attach to whatever identity the forwarder runs as.
      const policy = new ManagedPolicy(this, 'ForwarderSendPolicy', {
        description:
          'serverless-service-controller forwarder: sqs:SendMessage to the work and node queues',
        statements: [sendOnly],
      });
      new CfnOutput(this, 'ForwarderPolicyArn', { value: policy.managedPolicyArn });
    }
    if (settings.restrictQueueSenders) {
      this.restrictQueueSenders(functionsRole, forwarderRole, settings.queueSenderArns);
    }
    if (settings.kubernetesAllowInsecureConnection) {
      Annotations.of(this).addWarningV2(
        'serverless-service-controller:kubernetesAllowInsecureConnection',
        'kubernetesAllowInsecureConnection: the functions accept a kubeconfig whose server is plain HTTP or whose certificate is not verified; the bearer token can then be read or taken on the way (docs/tenant-safety.md#cluster-credentials)',
      );
    }

    // By default no image: infra/k8s runs the bundle on a public Node image (no Docker to deploy).
    let forwarderImage: string | undefined;
    if (settings.forwarderImageBuild !== 'none') {
      const image = new DockerImageAsset(this, 'ForwarderImage', {
        directory: root,
        file: 'functions/forwarder/Dockerfile',
        platform:
          settings.forwarderImageBuild === 'linux/amd64'
            ? Platform.LINUX_AMD64
            : Platform.LINUX_ARM64,
        exclude: ['**', '!package.json', '!package-lock.json', '!tsconfig.json', '!functions/**'],
      });
      forwarderImage = image.imageUri;
    }

    this.functions = { serviceSync, nodeSync, sweep };
    this.monitoring = new ControllerMonitoring(this, 'Monitoring', {
      clusterName: settings.clusterName,
      dashboardName:
        props.dashboardName ?? `${stack.stackName}-${this.node.id}`.replace(/[^A-Za-z0-9_-]/g, '-'),
      queue: this.queue,
      nodeQueue: this.nodeQueue,
      deadLetterQueue: deadLetters,
      functions: { serviceSync, nodeSync, sweep },
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
    new CfnOutput(this, 'DeadLetterQueueUrl', { value: deadLetters.queueUrl });
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

  /**
   * One security group every NLB carries, allowed on the node security groups for the NodePort
   * range (and kube-proxy's health port), instead of a rule per Service on the nodes.
   */
  private backendSecurityGroup(
    vpc: IVpc,
    settings: ControllerSettings,
  ): ISecurityGroup | undefined {
    // Without a rule on the nodes every target times out. On EKS the nodes carry the cluster
    // security group, read at deploy time; elsewhere the settings must name the groups.
    const nodeGroupIds =
      settings.nodeSecurityGroupIds.length > 0
        ? settings.nodeSecurityGroupIds
        : settings.kubernetesSecretArn === undefined
          ? [this.eksClusterSecurityGroupId(settings.clusterName)]
          : [];
    if (nodeGroupIds.length === 0) return undefined;
    // A deploy-time cluster name (an eks.Cluster's) is left out: cdk-nag reads only a literal
    // description. A literal one stays as release 0.1 wrote it, since a new one replaces the group.
    const group = this.closedSecurityGroup(
      'BackendSecurityGroup',
      vpc,
      Token.isUnresolved(settings.clusterName)
        ? 'NLBs of serverless-service-controller'
        : `NLBs of serverless-service-controller for ${settings.clusterName}`,
    );
    nodeGroupIds.forEach((nodeGroupId, index) => {
      new CfnSecurityGroupEgress(this, `NlbToNodes${index}`, {
        groupId: group.securityGroupId,
        ipProtocol: '-1',
        destinationSecurityGroupId: nodeGroupId,
        description: 'NodePorts and health checks on the nodes',
      });
      for (const protocol of ['tcp', 'udp'] as const) {
        new CfnSecurityGroupIngress(this, `NodePortsFromNlb${index}${protocol}`, {
          groupId: nodeGroupId,
          ipProtocol: protocol,
          fromPort: 30000,
          toPort: 32767,
          sourceSecurityGroupId: group.securityGroupId,
          description: 'NodePorts from serverless-service-controller NLBs',
        });
      }
      new CfnSecurityGroupIngress(this, `HealthFromNlb${index}`, {
        groupId: nodeGroupId,
        ipProtocol: 'tcp',
        fromPort: 10256,
        toPort: 10256,
        sourceSecurityGroupId: group.securityGroupId,
        description: 'kube-proxy health from serverless-service-controller NLBs',
      });
    });
    return group;
  }

  /** The EKS cluster security group, which every managed node carries, from eks:DescribeCluster at deploy. */
  private eksClusterSecurityGroupId(clusterName: string): string {
    const path = 'cluster.resourcesVpcConfig.clusterSecurityGroupId';
    const lookup = new AwsCustomResource(this, 'ClusterSecurityGroupLookup', {
      onUpdate: {
        service: 'EKS',
        action: 'DescribeCluster',
        parameters: { name: clusterName },
        physicalResourceId: PhysicalResourceId.of(`${clusterName}-cluster-security-group`),
        outputPaths: [path],
      },
      policy: AwsCustomResourcePolicy.fromSdkCalls({
        resources: [
          Stack.of(this).formatArn({
            service: 'eks',
            resource: 'cluster',
            resourceName: clusterName,
          }),
        ],
      }),
      installLatestAwsSdk: false,
    });
    // CDK keeps the function behind every AwsCustomResource at the stack's top level.
    const provider = Stack.of(this).node.tryFindChild(
      `AWS${AwsCustomResource.PROVIDER_FUNCTION_UUID.replace(/-/g, '')}`,
    );
    if (provider !== undefined) acknowledgeLookupFunction(provider);
    return lookup.getResponseField(path);
  }

  /** A security group with no outbound rule until one is added: egress is granted, not assumed. */
  private closedSecurityGroup(id: string, vpc: IVpc, description: string): SecurityGroup {
    return new SecurityGroup(this, id, { vpc, description, allowAllOutbound: false });
  }

  private functionPlacement(
    vpc: IVpc,
    settings: ControllerSettings,
  ): FunctionPlacement | undefined {
    if (settings.functionSubnetIds.length === 0) return undefined;
    const securityGroup = this.closedSecurityGroup(
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

  /**
   * Only the controller may put messages on its queues: an explicit deny of sqs:SendMessage
   * (SendMessageBatch included) to every principal but the functions' role, which sends resyncs,
   * retries and node ticks, the forwarder's role and the given ARNs. An explicit deny wins over
   * any identity policy in the account, the node role's and `sqs:*` included. The DLQ is left as
   * it is: only SQS's redrive and the functions put messages there.
   */
  private restrictQueueSenders(
    functionsRole: Role,
    forwarderRole: Role | undefined,
    others: readonly string[],
  ): void {
    const allowed = [
      functionsRole.roleArn,
      ...(forwarderRole !== undefined ? [forwarderRole.roleArn] : []),
      ...others,
    ];
    for (const queue of [this.queue, this.nodeQueue]) {
      queue.addToResourcePolicy(
        new PolicyStatement({
          sid: 'OnlyControllerSends',
          effect: Effect.DENY,
          principals: [new AnyPrincipal()],
          actions: ['sqs:SendMessage'],
          resources: [queue.queueArn],
          conditions: { ArnNotLike: { 'aws:PrincipalArn': allowed } },
        }),
      );
    }
  }

  private forwarderRole(settings: ControllerSettings): Role | undefined {
    if (settings.forwarderIdentity === 'none') return undefined;
    if (settings.forwarderIdentity === 'irsa') {
      if (settings.oidcProviderArn === undefined || settings.oidcIssuer === undefined) {
        throw new Error('forwarderIdentity=irsa needs oidcProviderArn and oidcIssuer');
      }
      const issuer = settings.oidcIssuer.replace(/^https:\/\//, '');
      return new Role(this, 'ForwarderRole', {
        description: 'serverless-service-controller forwarder (IRSA): sqs:SendMessage only',
        assumedBy: new WebIdentityPrincipal(settings.oidcProviderArn, {
          StringEquals: {
            [`${issuer}:sub`]: `system:serviceaccount:${forwarderNamespace}:${forwarderServiceAccount}`,
            [`${issuer}:aud`]: 'sts.amazonaws.com',
          },
        }),
      });
    }
    const role = new Role(this, 'ForwarderRole', {
      description: 'serverless-service-controller forwarder (Pod Identity): sqs:SendMessage only',
      assumedBy: new SessionTagsPrincipal(new ServicePrincipal('pods.eks.amazonaws.com')),
    });
    new CfnPodIdentityAssociation(this, 'ForwarderPodIdentity', {
      clusterName: settings.clusterName,
      namespace: forwarderNamespace,
      serviceAccount: forwarderServiceAccount,
      roleArn: role.roleArn,
    });
    return role;
  }
}

interface FunctionPlacement {
  readonly vpc: IVpc;
  readonly vpcSubnets: { subnets: ReturnType<typeof Subnet.fromSubnetId>[] };
  readonly securityGroups: ISecurityGroup[];
}
