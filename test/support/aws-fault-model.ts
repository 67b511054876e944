import { EC2ServiceException } from '@aws-sdk/client-ec2';
import {
  DescribeListenersCommand,
  DescribeLoadBalancersCommand,
  DescribeTargetGroupsCommand,
  DuplicateListenerException,
  DuplicateLoadBalancerNameException,
  DuplicateTargetGroupNameException,
  ElasticLoadBalancingV2Client,
  ElasticLoadBalancingV2ServiceException,
  InvalidSecurityGroupException,
  ListenerNotFoundException,
  LoadBalancerNotFoundException,
  TargetGroupNotFoundException,
  type Listener,
  type LoadBalancer,
  type TargetGroup,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { HttpResponse } from '@smithy/protocol-http';
import type {
  DeserializeHandler,
  DeserializeHandlerArguments,
  DeserializeHandlerOutput,
  HandlerExecutionContext,
  MetadataBearer,
} from '@smithy/types';
import type { NlbClients } from '../../functions/aws/clients';
import type { InstrumentableClient } from '../../kit/aws-calls';
import type { MotoAccount } from '../../kit/moto';

/**
 * What AWS does that moto does not, for the tests that must hold against AWS itself. Attached as
 * SDK middleware (like AwsCallRecorder), so the code under test keeps its real clients, retry
 * strategy and error classes, and each fault is switched on by the test that wants it:
 *
 * - `eventualConsistency`: after a create returns an ID or ARN, the next calls that would see the
 *   resource do not. A call naming it answers AWS's "not found" for that service
 *   (`InvalidGroup.NotFound` from EC2; `TargetGroupNotFound`, `LoadBalancerNotFound`,
 *   `ListenerNotFound` from ELBv2, and `InvalidSecurityGroup` for a group named to ELBv2), without
 *   taking effect; a lookup that would list it (filters, names, the tagging API) leaves it out, and
 *   an ELBv2 lookup by name that then finds nothing answers "not found", as AWS does for an
 *   unknown name. EC2 documents this for new IDs
 *   (https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html).
 * - `loseAnswers`: a call takes effect in moto, but the client gets a 5xx (`InternalError` from
 *   EC2, `InternalFailure` from ELBv2) or a dropped connection. Per HTTP attempt, so the SDK's
 *   retries of a create run into what the first attempt made, as they do against AWS.
 * - `answerRepeatedCreatesAsAws`: CreateLoadBalancer and CreateTargetGroup for a name that exists,
 *   and CreateListener for a port the NLB listens on, with the same settings return the existing
 *   resource; with other settings they answer DuplicateLoadBalancerName, DuplicateTargetGroupName
 *   or DuplicateListener (each API reference page: "This operation is idempotent"). moto makes a
 *   second NLB of the same name and a second listener on the same port, and refuses every
 *   repeated CreateTargetGroup (docs/design.md §6).
 *
 * Errors are the SDK's own exception classes, with the fields its deserializer sets (`name`,
 * `Code`, `$fault`, `$metadata`), so the production code classifies them as it would AWS's.
 */
export class AwsFaultModel {
  /** What the model did, in order: `DescribeSecurityGroups: InvalidGroup.NotFound sg-…`. */
  readonly log: string[] = [];
  private window: Required<Omit<ConsistencyWindow, 'ms'>> & { ms?: number } = {
    calls: 0,
    after: [],
  };
  private readonly unseen = new Map<string, Unseen>();
  private lost: (LostAnswer & { remaining: number })[] = [];
  private repeatedCreatesAsAws = false;
  /** AWS's name registry, read outside the model: names are consistent, IDs are not. */
  private readonly names: ElasticLoadBalancingV2Client;

  constructor(account: MotoAccount) {
    this.names = account.client(ElasticLoadBalancingV2Client);
  }

  /** Instruments a client (EC2, ELBv2 or the tagging API); returns it for chaining. */
  attach<T extends InstrumentableClient>(client: T): T {
    client.middlewareStack.add(
      (next: DeserializeHandler<object, MetadataBearer>, context: HandlerExecutionContext) =>
        (args: DeserializeHandlerArguments<object>) =>
          this.handle(next, args, callOf(context)),
      { step: 'deserialize', priority: 'high', name: 'awsFaultModel' },
    );
    return client;
  }

  /** Instruments the NLB provider's clients (a lazily made tagging client when it is made). */
  attachAll(clients: NlbClients): NlbClients {
    const tagging = clients.tagging;
    return {
      elbv2: this.attach(clients.elbv2),
      ec2: this.attach(clients.ec2),
      tagging:
        typeof tagging === 'function'
          ? async () => this.attach(await tagging())
          : this.attach(tagging),
    };
  }

  /** Switches eventual consistency on: new resources stay unseen for `calls` calls (or `ms`). */
  eventualConsistency(window: ConsistencyWindow = {}): this {
    this.window = { calls: window.calls ?? 2, after: window.after ?? createOperations, ...window };
    return this;
  }

  /** AWS stops showing an existing resource for the next `calls` calls that would see it. */
  hide(id: string, calls: number): this {
    this.unseen.set(id, { kind: kindOf(id), calls, until: Number.POSITIVE_INFINITY });
    return this;
  }

  /** The next `times` attempts of `operation` take effect, and their answer is lost. */
  loseAnswers(rule: LostAnswer): this {
    this.lost.push({ ...rule, remaining: rule.times ?? 1 });
    return this;
  }

  answerRepeatedCreatesAsAws(on = true): this {
    this.repeatedCreatesAsAws = on;
    return this;
  }

  /** Back to plain moto: nothing new stays unseen, what was unseen shows, no answer is lost. */
  off(): void {
    this.window = { calls: 0, after: [] };
    this.unseen.clear();
    this.lost = [];
    this.repeatedCreatesAsAws = false;
  }

  /** IDs and ARNs AWS does not show yet. */
  unseenIds(): string[] {
    return [...this.unseen.keys()].filter((id) => this.isUnseen(id));
  }

  /** How many answers are still to be lost. */
  lostAnswersLeft(): number {
    return this.lost.reduce((sum, rule) => sum + rule.remaining, 0);
  }

  private async handle(
    next: DeserializeHandler<object, MetadataBearer>,
    args: DeserializeHandlerArguments<object>,
    call: Call,
  ): Promise<DeserializeHandlerOutput<MetadataBearer>> {
    const input = args.input as Record<string, unknown>;
    this.refuseUnseen(call, input);
    const existing = await this.repeatedCreate(call, input);
    const result = existing ?? (await next(args));
    if (!isCreate(call.operation)) this.hideUnseen(call, input, result.output);
    // An existing resource handed back is no new one: AWS has shown it before.
    else if (existing === undefined) this.openWindow(call, result.output);
    this.loseAnswer(call);
    return result;
  }

  /** A call naming an unseen resource: AWS's "not found", and no effect. */
  private refuseUnseen(call: Call, input: Record<string, unknown>): void {
    const named = idsIn(input).filter((id) => this.isUnseen(id));
    if (named.length === 0) return;
    for (const id of named) this.seenOnce(id);
    const [id] = named as [string];
    const kind = this.unseen.get(id)?.kind ?? kindOf(id);
    const error = notFound(call.service, kind, id);
    this.log.push(`${call.operation}: ${error.name} ${id}`);
    throw error;
  }

  /** Lookups leave unseen resources out; an ELBv2 lookup by name that then finds none refuses. */
  private hideUnseen(call: Call, input: Record<string, unknown>, output: unknown): void {
    if (typeof output !== 'object' || output === null) return;
    const lists = output as Record<string, unknown>;
    for (const [list, field] of Object.entries(listed)) {
      const items = lists[list];
      if (!Array.isArray(items)) continue;
      const shown = items.filter((item: Record<string, unknown>) => {
        const id = idOf(text(item[field]));
        if (!this.isUnseen(id)) return true;
        this.seenOnce(id);
        this.log.push(`${call.operation}: left out ${id}`);
        return false;
      });
      if (shown.length === items.length) continue;
      lists[list] = shown;
      if (shown.length === 0 && Array.isArray(input.Names) && call.service !== 'EC2') {
        const error = notFound(
          call.service,
          list === 'TargetGroups' ? 'target group' : 'load balancer',
          String(input.Names),
        );
        this.log.push(`${call.operation}: ${error.name} for name ${String(input.Names)}`);
        throw error;
      }
    }
  }

  private openWindow(call: Call, output: unknown): void {
    if (!this.window.after.includes(call.operation as CreateOperation) || this.window.calls <= 0)
      return;
    const id = createdIdOf(call.operation, output);
    if (id === undefined) return;
    this.unseen.set(id, {
      kind: kindOf(id),
      calls: this.window.calls,
      until: this.window.ms === undefined ? Number.POSITIVE_INFINITY : Date.now() + this.window.ms,
    });
    this.log.push(`${call.operation}: ${id} unseen for ${this.window.calls} calls`);
  }

  private loseAnswer(call: Call): void {
    const rule = this.lost.find(
      (r) =>
        r.remaining > 0 &&
        r.operation === call.operation &&
        (r.service === undefined || r.service === call.service),
    );
    if (rule === undefined) return;
    rule.remaining -= 1;
    const error =
      rule.as === 'dropped-connection' ? droppedConnection() : serverError(call.service);
    this.log.push(`${call.operation}: done, answer lost (${error.name})`);
    throw error;
  }

  /** AWS's answer to a create of a name that exists, or undefined to let moto answer. */
  private async repeatedCreate(
    call: Call,
    input: Record<string, unknown>,
  ): Promise<DeserializeHandlerOutput<MetadataBearer> | undefined> {
    if (!this.repeatedCreatesAsAws || call.service !== 'ElasticLoadBalancingV2') return undefined;
    const name = text(input.Name);
    if (call.operation === 'CreateTargetGroup') {
      const existing = await this.existingTargetGroup(name);
      if (existing === undefined) return undefined;
      if (!sameTargetGroup(input, existing)) {
        this.log.push(`CreateTargetGroup: DuplicateTargetGroupName ${name}`);
        throw modelled(
          DuplicateTargetGroupNameException,
          'DuplicateTargetGroupName',
          'A target group with the same name exists, but with different settings',
        );
      }
      this.log.push(`CreateTargetGroup: returned the existing ${name}`);
      return answer({ TargetGroups: [existing] });
    }
    if (call.operation === 'CreateLoadBalancer') {
      const existing = await this.existingLoadBalancer(name);
      if (existing === undefined) return undefined;
      if (!sameLoadBalancer(input, existing)) {
        this.log.push(`CreateLoadBalancer: DuplicateLoadBalancerName ${name}`);
        throw modelled(
          DuplicateLoadBalancerNameException,
          'DuplicateLoadBalancerName',
          'A load balancer with the same name exists, but with different settings',
        );
      }
      this.log.push(`CreateLoadBalancer: returned the existing ${name}`);
      return answer({ LoadBalancers: [existing] });
    }
    if (call.operation === 'CreateListener') {
      const existing = await this.existingListener(text(input.LoadBalancerArn), input.Port);
      if (existing === undefined) return undefined;
      if (!sameListener(input, existing)) {
        this.log.push(`CreateListener: DuplicateListener port ${text(input.Port)}`);
        throw modelled(
          DuplicateListenerException,
          'DuplicateListener',
          'A listener with the specified port already exists.',
        );
      }
      this.log.push(`CreateListener: returned the existing port ${text(input.Port)}`);
      return answer({ Listeners: [existing] });
    }
    return undefined;
  }

  private async existingListener(arn: string, port: unknown): Promise<Listener | undefined> {
    try {
      const found = await this.names.send(new DescribeListenersCommand({ LoadBalancerArn: arn }));
      return found.Listeners?.find((l) => l.Port === port);
    } catch (error) {
      if (error instanceof LoadBalancerNotFoundException) return undefined;
      throw error;
    }
  }

  private async existingTargetGroup(name: string): Promise<TargetGroup | undefined> {
    try {
      const found = await this.names.send(new DescribeTargetGroupsCommand({ Names: [name] }));
      return found.TargetGroups?.[0];
    } catch (error) {
      if (error instanceof TargetGroupNotFoundException) return undefined;
      throw error;
    }
  }

  private async existingLoadBalancer(name: string): Promise<LoadBalancer | undefined> {
    try {
      const found = await this.names.send(new DescribeLoadBalancersCommand({ Names: [name] }));
      return found.LoadBalancers?.[0];
    } catch (error) {
      if (error instanceof LoadBalancerNotFoundException) return undefined;
      throw error;
    }
  }

  private isUnseen(id: string): boolean {
    const entry = this.unseen.get(id);
    if (entry === undefined) return false;
    if (entry.calls > 0 && Date.now() < entry.until) return true;
    this.unseen.delete(id);
    this.log.push(`${id} now visible`);
    return false;
  }

  private seenOnce(id: string): void {
    const entry = this.unseen.get(id);
    if (entry !== undefined) entry.calls -= 1;
  }
}

type CreateOperation =
  'CreateSecurityGroup' | 'CreateTargetGroup' | 'CreateLoadBalancer' | 'CreateListener';
const createOperations: readonly CreateOperation[] = [
  'CreateSecurityGroup',
  'CreateTargetGroup',
  'CreateLoadBalancer',
  'CreateListener',
];

export interface ConsistencyWindow {
  /** Calls that would see a new resource before it shows (each naming it, or listing it); default 2. */
  readonly calls?: number;
  /** Or a time: it shows this many ms after its create, if that comes before the calls run out. */
  readonly ms?: number;
  /** The creates whose resources start unseen (default: all four). */
  readonly after?: readonly CreateOperation[];
}

export interface LostAnswer {
  readonly operation: string;
  readonly service?: 'EC2' | 'ElasticLoadBalancingV2' | 'ResourceGroupsTaggingAPI';
  /** How many attempts lose their answer (default 1). */
  readonly times?: number;
  /** A 5xx (default) or a connection dropped after the request was handled. */
  readonly as?: 'server-error' | 'dropped-connection';
}

type Kind = 'security group' | 'target group' | 'load balancer' | 'listener';

interface Unseen {
  readonly kind: Kind;
  calls: number;
  readonly until: number;
}

interface Call {
  readonly service: string;
  readonly operation: string;
}

function callOf(context: HandlerExecutionContext): Call {
  return {
    service: (context.clientName ?? 'Unknown').replace(/Client$/, ''),
    operation: (context.commandName ?? 'Unknown').replace(/Command$/, ''),
  };
}

/** A scalar of a request or answer as text (anything else as nothing). */
function text(value: unknown): string {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? String(value)
    : '';
}

function isCreate(operation: string): boolean {
  return (createOperations as readonly string[]).includes(operation);
}

/** The lists lookups answer with, and the field that names each item. */
const listed: Readonly<Record<string, string>> = {
  SecurityGroups: 'GroupId',
  TargetGroups: 'TargetGroupArn',
  LoadBalancers: 'LoadBalancerArn',
  Listeners: 'ListenerArn',
  ResourceTagMappingList: 'ResourceARN',
};

/** Every ID or ARN a request names, anywhere in it; filters look things up instead. */
function idsIn(value: unknown): string[] {
  if (typeof value === 'string') return [idOf(value)];
  if (Array.isArray(value)) return value.flatMap(idsIn);
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([key, inner]) => (key === 'Filters' ? [] : idsIn(inner)));
}

/** A security group's ARN (the tagging API's) stands for its ID. */
function idOf(value: string): string {
  return value.includes(':security-group/') ? value.slice(value.lastIndexOf('/') + 1) : value;
}

function kindOf(id: string): Kind {
  if (id.startsWith('sg-')) return 'security group';
  if (id.includes(':listener/')) return 'listener';
  if (id.includes(':targetgroup/')) return 'target group';
  return 'load balancer';
}

function createdIdOf(operation: string, output: unknown): string | undefined {
  const o = output as {
    GroupId?: string;
    TargetGroups?: { TargetGroupArn?: string }[];
    LoadBalancers?: { LoadBalancerArn?: string }[];
    Listeners?: { ListenerArn?: string }[];
  };
  switch (operation) {
    case 'CreateSecurityGroup':
      return o.GroupId;
    case 'CreateTargetGroup':
      return o.TargetGroups?.[0]?.TargetGroupArn;
    case 'CreateLoadBalancer':
      return o.LoadBalancers?.[0]?.LoadBalancerArn;
    default:
      return o.Listeners?.[0]?.ListenerArn;
  }
}

/** The settings AWS compares: the same name with these equal is the same target group. */
function sameTargetGroup(input: Record<string, unknown>, existing: TargetGroup): boolean {
  const keys = [
    'Protocol',
    'Port',
    'VpcId',
    'TargetType',
    'HealthCheckProtocol',
    'HealthCheckPort',
    'HealthCheckEnabled',
    'HealthCheckPath',
    'HealthCheckIntervalSeconds',
    'HealthCheckTimeoutSeconds',
    'HealthyThresholdCount',
    'UnhealthyThresholdCount',
  ] as const;
  const found = existing as Record<string, unknown>;
  const matcher = (input.Matcher as { HttpCode?: string } | undefined)?.HttpCode;
  return (
    keys.every((k) => input[k] === undefined || text(input[k]) === text(found[k])) &&
    (matcher === undefined || matcher === existing.Matcher?.HttpCode)
  );
}

function sameLoadBalancer(input: Record<string, unknown>, existing: LoadBalancer): boolean {
  const sorted = (ids: readonly (string | undefined)[]) => JSON.stringify([...ids].sort());
  const mappings = (input.SubnetMappings as { SubnetId?: string }[] | undefined)?.map(
    (m) => m.SubnetId,
  );
  const subnets = (input.Subnets as string[] | undefined) ?? mappings ?? [];
  return (
    (input.Type ?? 'application') === existing.Type &&
    (input.Scheme ?? 'internet-facing') === existing.Scheme &&
    (input.IpAddressType ?? 'ipv4') === existing.IpAddressType &&
    sorted(subnets) === sorted((existing.AvailabilityZones ?? []).map((z) => z.SubnetId)) &&
    sorted((input.SecurityGroups as string[] | undefined) ?? []) ===
      sorted(existing.SecurityGroups ?? [])
  );
}

function sameListener(input: Record<string, unknown>, existing: Listener): boolean {
  const action = (input.DefaultActions as { TargetGroupArn?: string }[] | undefined)?.[0];
  const certificate = (input.Certificates as { CertificateArn?: string }[] | undefined)?.[0];
  return (
    input.Protocol === existing.Protocol &&
    action?.TargetGroupArn === existing.DefaultActions?.[0]?.TargetGroupArn &&
    (certificate === undefined ||
      certificate.CertificateArn === existing.Certificates?.[0]?.CertificateArn) &&
    (input.SslPolicy === undefined || input.SslPolicy === existing.SslPolicy)
  );
}

function answer(output: object): DeserializeHandlerOutput<MetadataBearer> {
  return {
    output: { ...output, $metadata: { httpStatusCode: 200, attempts: 1 } },
    response: new HttpResponse({ statusCode: 200, headers: {} }),
  };
}

type ModelledException = new (options: {
  message: string;
  $metadata: { httpStatusCode: number };
  Message?: string;
}) => Error;

/** A modelled ELBv2 exception, with the fields the SDK's deserializer sets. */
function modelled(Exception: ModelledException, code: string, message: string): Error {
  const error = new Exception({ message, Message: message, $metadata: { httpStatusCode: 400 } });
  return Object.assign(error, { Code: code, $injected: true });
}

/** AWS's "not found" for a resource of `kind`, as `service` answers it. */
export function notFound(service: string, kind: Kind, id: string): Error {
  if (service === 'EC2') {
    return awsServiceError(
      'EC2',
      'InvalidGroup.NotFound',
      400,
      `The security group '${id}' does not exist`,
    );
  }
  switch (kind) {
    case 'security group':
      return modelled(
        InvalidSecurityGroupException,
        'InvalidSecurityGroup',
        `Security group '${id}' does not exist`,
      );
    case 'target group':
      return modelled(
        TargetGroupNotFoundException,
        'TargetGroupNotFound',
        'One or more target groups not found',
      );
    case 'listener':
      return modelled(
        ListenerNotFoundException,
        'ListenerNotFound',
        'One or more listeners not found',
      );
    case 'load balancer':
      return modelled(
        LoadBalancerNotFoundException,
        'LoadBalancerNotFound',
        'One or more load balancers not found',
      );
  }
}

/**
 * An error the SDK would raise for an AWS error `code` it has no class for (all of EC2's, and
 * ELBv2's 5xx), shaped as its deserializer shapes it.
 */
export function awsServiceError(
  service: string,
  code: string,
  httpStatusCode: number,
  message: string,
): Error {
  const options = {
    name: code,
    $fault: httpStatusCode >= 500 ? ('server' as const) : ('client' as const),
    $metadata: { httpStatusCode, attempts: 1 },
    message,
  };
  const error =
    service === 'EC2'
      ? new EC2ServiceException(options)
      : service === 'ElasticLoadBalancingV2'
        ? new ElasticLoadBalancingV2ServiceException(options)
        : Object.assign(new Error(message), options);
  return Object.assign(error, { Code: code, $injected: true });
}

function serverError(service: string): Error {
  return service === 'EC2'
    ? awsServiceError('EC2', 'InternalError', 500, 'An internal error has occurred (injected)')
    : awsServiceError(service, 'InternalFailure', 500, 'Internal failure (injected)');
}

/** What the Node HTTP handler raises when the connection drops before the answer arrives. */
function droppedConnection(): Error {
  const error = new Error('socket hang up (injected)');
  return Object.assign(error, { code: 'ECONNRESET', $metadata: { attempts: 1 }, $injected: true });
}
