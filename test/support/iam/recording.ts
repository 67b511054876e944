import {
  DescribeSecurityGroupsCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  EC2Client,
} from '@aws-sdk/client-ec2';
import {
  DescribeListenersCommand,
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  DescribeTargetGroupsCommand,
  ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { HttpRequest } from '@smithy/protocol-http';
import type {
  BuildHandler,
  BuildHandlerArguments,
  HandlerExecutionContext,
  MetadataBearer,
  MiddlewareStack,
} from '@smithy/types';
import { callerRoleOfAppId } from '../../../functions/aws/caller-role';
import { appendCall, recordingDirectory, type Identity } from './call-log';
import {
  describeCall,
  type AwsState,
  type ExistingResource,
  type PendingCall,
  type Tags,
} from './request-context';

/**
 * The recorder's IAM mode (kit/aws-calls.ts turns it on when a test run keeps a call
 * log): for each call, who made it, and the IAM request context AWS would authorize it with, read
 * from the call's input and answer and from the emulator's state just before the call.
 */

interface Recordable {
  readonly middlewareStack: MiddlewareStack<object, MetadataBearer>;
}

/** moto's account when a request names none. */
const motoDefaultAccount = '123456789012';

let testFile = '';

/** The test file whose calls this worker records now (informational: named in failure messages). */
export function recordCallsOf(file: string): void {
  testFile = file;
}

/**
 * Whose call it is: the role the client was built for (functions/aws/caller-role.ts), as the
 * controller's code and the tests that stand in for it build their clients. A client without one
 * is the test's own (setting up a world, creating a foreign load balancer, deleting a listener by
 * hand): its calls are not the controller's and are not evaluated.
 */
async function identityOf(client: Recordable): Promise<Identity> {
  const appId = (client as { config?: { userAgentAppId?: unknown } }).config?.userAgentAppId;
  const value: unknown = typeof appId === 'function' ? await (appId as () => unknown)() : appId;
  return callerRoleOfAppId(value) ?? 'test';
}

export function addIamRecording(client: Recordable): void {
  const dir = recordingDirectory();
  if (dir === undefined) return;
  client.middlewareStack.add(
    (next: BuildHandler<object, MetadataBearer>, context: HandlerExecutionContext) =>
      async (args: BuildHandlerArguments<object>) => {
        const identity = await identityOf(client);
        const service = (context.clientName ?? 'Unknown').replace(/Client$/, '');
        const operation = (context.commandName ?? 'Unknown').replace(/Command$/, '');
        const call = `${service}.${operation}`;
        if (identity === 'test' || identity === 'operator') {
          appendCall(dir, { identity, call, testFile });
          return next(args);
        }
        // Runs after the account binding (build step, normal priority) has set its header.
        const request = HttpRequest.isInstance(args.request) ? args.request : undefined;
        const account = request?.headers['x-moto-account-id'] ?? motoDefaultAccount;
        let pending: PendingCall;
        let region = '';
        try {
          region = await regionOf(client);
          const state = motoState(endpointOf(request), account, region);
          pending = await describeCall(
            { service, operation, input: args.input, account, region },
            state,
          );
        } catch (error) {
          appendCall(dir, { identity, call, testFile, account, problem: String(error) });
          return next(args);
        }
        const finish = async (output: unknown, outcome: string) => {
          try {
            const authorizations = await pending.finish(output);
            appendCall(dir, { identity, call, testFile, account, region, outcome, authorizations });
          } catch (error) {
            appendCall(dir, { identity, call, testFile, account, problem: String(error) });
          }
        };
        try {
          const result = await next(args);
          await finish(result.output, 'ok');
          return result;
        } catch (error) {
          await finish(undefined, error instanceof Error ? error.name : 'error');
          throw error;
        }
      },
    { step: 'build', priority: 'low', name: 'iamRecordingContext' },
  );
}

async function regionOf(client: Recordable): Promise<string> {
  const region = (client as { config?: { region?: unknown } }).config?.region;
  const value: unknown = typeof region === 'function' ? await (region as () => unknown)() : region;
  if (typeof value !== 'string') throw new Error('the client has no Region');
  return value;
}

function endpointOf(request: HttpRequest | undefined): string {
  if (request === undefined) throw new Error('no HTTP request to find the endpoint by');
  return `${request.protocol}//${request.hostname}${request.port ? `:${request.port}` : ''}`;
}

// ---------------------------------------------------------------------------------------------
// The emulator's state, read with clients of our own (not recorded, not rate-limited).

const states = new Map<string, AwsState>();
const loadBalancerTypes = new Map<string, string>();
const vpcs = new Map<string, Awaited<ReturnType<AwsState['vpc']>>>();

function bound<C extends Recordable>(client: C, account: string): C {
  client.middlewareStack.add(
    (next) => (args) => {
      if (HttpRequest.isInstance(args.request)) {
        args.request.headers['x-moto-account-id'] = account;
      }
      return next(args);
    },
    { step: 'build', name: 'motoAccount' },
  );
  return client;
}

function tagsOf(tags: readonly { Key?: string; Value?: string }[] | undefined): Tags {
  return Object.fromEntries((tags ?? []).map((t) => [t.Key ?? '', t.Value ?? '']));
}

function notFound(error: unknown): boolean {
  return error instanceof Error && /NotFound/.test(error.name);
}

function motoState(endpoint: string, account: string, region: string): AwsState {
  const key = `${endpoint} ${account} ${region}`;
  const known = states.get(key);
  if (known !== undefined) return known;
  const config = {
    endpoint,
    region,
    credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    maxAttempts: 3,
  };
  const elb = bound(new ElasticLoadBalancingV2Client(config), account);
  const ec2 = bound(new EC2Client(config), account);
  // What each resource looked like when last seen, for calls made after it is gone.
  const lastTags = new Map<string, Tags>();
  const seen = (resource: string, tags: Tags): ExistingResource => {
    lastTags.set(resource, tags);
    return { exists: true, tags, tagsKnown: true };
  };
  const vanished = (resource: string): ExistingResource => {
    const tags = lastTags.get(resource);
    return { exists: false, tags: tags ?? {}, tagsKnown: tags !== undefined };
  };

  const exists = async (arn: string): Promise<boolean> => {
    try {
      if (arn.includes(':targetgroup/')) {
        await elb.send(new DescribeTargetGroupsCommand({ TargetGroupArns: [arn] }));
      } else if (arn.includes(':listener/')) {
        await elb.send(new DescribeListenersCommand({ ListenerArns: [arn] }));
      } else {
        await elb.send(new DescribeLoadBalancersCommand({ LoadBalancerArns: [arn] }));
      }
      return true;
    } catch (error) {
      if (notFound(error)) return false;
      throw error;
    }
  };

  const state: AwsState = {
    elbResource: async (arn): Promise<ExistingResource> => {
      // moto answers DescribeTags for an ARN it does not know (AWS does not): ask both at once.
      const [there, found] = await Promise.all([
        exists(arn),
        elb.send(new DescribeTagsCommand({ ResourceArns: [arn] })).catch((error: unknown) => {
          if (notFound(error)) return undefined;
          throw error;
        }),
      ]);
      if (!there || found === undefined) return vanished(arn);
      return seen(arn, tagsOf(found.TagDescriptions?.[0]?.Tags));
    },
    loadBalancerType: async (arn) => {
      const cached = loadBalancerTypes.get(arn);
      if (cached !== undefined) return cached;
      try {
        const found = await elb.send(new DescribeLoadBalancersCommand({ LoadBalancerArns: [arn] }));
        const type = found.LoadBalancers?.[0]?.Type;
        if (type !== undefined) loadBalancerTypes.set(arn, type);
        return type;
      } catch (error) {
        if (notFound(error)) return undefined;
        throw error;
      }
    },
    rememberLoadBalancerType: (arn, type) => {
      loadBalancerTypes.set(arn, type);
    },
    rememberTags: (resource, tags) => {
      lastTags.set(resource, tags);
    },
    hasLoadBalancers: async () => {
      const found = await elb.send(new DescribeLoadBalancersCommand({ PageSize: 1 }));
      return (found.LoadBalancers ?? []).length > 0;
    },
    securityGroup: async (id) => {
      try {
        const found = await ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: [id] }));
        const group = found.SecurityGroups?.[0];
        if (group === undefined) return vanished(id);
        return { ...seen(id, tagsOf(group.Tags)), vpcId: group.VpcId };
      } catch (error) {
        if (notFound(error)) return vanished(id);
        throw error;
      }
    },
    vpc: async (id) => {
      const cached = vpcs.get(`${key} ${id}`);
      if (cached !== undefined) return cached;
      try {
        const found = (await ec2.send(new DescribeVpcsCommand({ VpcIds: [id] }))).Vpcs?.[0];
        const subnets = await ec2.send(
          new DescribeSubnetsCommand({ Filters: [{ Name: 'vpc-id', Values: [id] }] }),
        );
        const clusters = [
          ...new Set(
            (subnets.Subnets ?? []).flatMap((s) =>
              (s.Tags ?? []).flatMap((t) =>
                t.Key?.startsWith('kubernetes.io/cluster/')
                  ? [t.Key.slice('kubernetes.io/cluster/'.length)]
                  : [],
              ),
            ),
          ),
        ].sort();
        const vpc = {
          exists: found !== undefined,
          tags: tagsOf(found?.Tags),
          tagsKnown: found !== undefined,
          tenancy: found?.InstanceTenancy,
          clusters,
        };
        vpcs.set(`${key} ${id}`, vpc);
        return vpc;
      } catch (error) {
        if (notFound(error)) return { exists: false, tags: {}, tagsKnown: false, clusters: [] };
        throw error;
      }
    },
  };
  states.set(key, state);
  return state;
}
