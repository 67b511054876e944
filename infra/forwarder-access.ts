import { CfnOutput } from 'aws-cdk-lib';
import { Platform, DockerImageAsset } from 'aws-cdk-lib/aws-ecr-assets';
import { CfnPodIdentityAssociation } from 'aws-cdk-lib/aws-eks';
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
import type { Queue } from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { packageRoot } from '../functions/package/package-root';
import type { ControllerSettings } from './settings-schema';

/**
 * What the construct gives the forwarder: its identity, its one permission and, when asked, its
 * image. Created in the construct's own scope, so their logical IDs are the construct's.
 */

/** Where the forwarder runs (infra/k8s). */
export const forwarderNamespace = 'serverless-service-controller';
export const forwarderServiceAccount = 'forwarder';

/** The queues the forwarder sends to. */
export interface ControllerQueues {
  readonly work: Queue;
  readonly nodes: Queue;
}

/** The forwarder's one permission, sqs:SendMessage to both queues, on its role or as a policy. */
export function forwarderAccess(
  scope: Construct,
  settings: ControllerSettings,
  queues: ControllerQueues,
  functionsRole: Role,
): void {
  // Send only: not even GetQueueAttributes, which grantSendMessages would add. Service changes
  // go to the work queue, Node changes to the node queue.
  const sendOnly = new PolicyStatement({
    actions: ['sqs:SendMessage'],
    resources: [queues.work.queueArn, queues.nodes.queueArn],
  });
  const forwarderRole = forwarderRoleFor(scope, settings);
  if (forwarderRole !== undefined) {
    forwarderRole.addToPrincipalPolicy(sendOnly);
    new CfnOutput(scope, 'ForwarderRoleArn', { value: forwarderRole.roleArn });
  } else {
    // Outside EKS: a policy to attach to whatever identity the forwarder runs as.
    const policy = new ManagedPolicy(scope, 'ForwarderSendPolicy', {
      description:
        'serverless-service-controller forwarder: sqs:SendMessage to the work and node queues',
      statements: [sendOnly],
    });
    new CfnOutput(scope, 'ForwarderPolicyArn', { value: policy.managedPolicyArn });
  }
  if (settings.restrictQueueSenders) {
    restrictQueueSenders(queues, functionsRole, forwarderRole, settings.queueSenderArns);
  }
}

/** The forwarder's image URI, when the settings ask CDK to build one. */
export function forwarderImage(scope: Construct, settings: ControllerSettings): string | undefined {
  // By default no image: infra/k8s runs the bundle on a public Node image (no Docker to deploy).
  if (settings.forwarderImageBuild === 'none') return undefined;
  const image = new DockerImageAsset(scope, 'ForwarderImage', {
    directory: packageRoot(),
    file: 'functions/forwarder/Dockerfile',
    platform:
      settings.forwarderImageBuild === 'linux/amd64' ? Platform.LINUX_AMD64 : Platform.LINUX_ARM64,
    exclude: ['**', '!package.json', '!package-lock.json', '!tsconfig.json', '!functions/**'],
  });
  return image.imageUri;
}

/**
 * Only the controller may put messages on its queues: an explicit deny of sqs:SendMessage
 * (SendMessageBatch included) to every principal but the functions' role, which sends resyncs,
 * retries and node ticks, the forwarder's role and the given ARNs. An explicit deny wins over
 * any identity policy in the account, the node role's and `sqs:*` included. The DLQ is left as
 * it is: only SQS's redrive and the functions put messages there.
 */
function restrictQueueSenders(
  queues: ControllerQueues,
  functionsRole: Role,
  forwarderRole: Role | undefined,
  others: readonly string[],
): void {
  const allowed = [
    functionsRole.roleArn,
    ...(forwarderRole !== undefined ? [forwarderRole.roleArn] : []),
    ...others,
  ];
  for (const queue of [queues.work, queues.nodes]) {
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

function forwarderRoleFor(scope: Construct, settings: ControllerSettings): Role | undefined {
  if (settings.forwarderIdentity === 'none') return undefined;
  if (settings.forwarderIdentity === 'irsa') {
    if (settings.oidcProviderArn === undefined || settings.oidcIssuer === undefined) {
      throw new Error('forwarderIdentity=irsa needs oidcProviderArn and oidcIssuer');
    }
    const issuer = settings.oidcIssuer.replace(/^https:\/\//, '');
    return new Role(scope, 'ForwarderRole', {
      description: 'serverless-service-controller forwarder (IRSA): sqs:SendMessage only',
      assumedBy: new WebIdentityPrincipal(settings.oidcProviderArn, {
        StringEquals: {
          [`${issuer}:sub`]: `system:serviceaccount:${forwarderNamespace}:${forwarderServiceAccount}`,
          [`${issuer}:aud`]: 'sts.amazonaws.com',
        },
      }),
    });
  }
  const role = new Role(scope, 'ForwarderRole', {
    description: 'serverless-service-controller forwarder (Pod Identity): sqs:SendMessage only',
    assumedBy: new SessionTagsPrincipal(new ServicePrincipal('pods.eks.amazonaws.com')),
  });
  new CfnPodIdentityAssociation(scope, 'ForwarderPodIdentity', {
    clusterName: settings.clusterName,
    namespace: forwarderNamespace,
    serviceAccount: forwarderServiceAccount,
    roleArn: role.roleArn,
  });
  return role;
}
