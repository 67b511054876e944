import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  runSimulation,
  runUnsafeSimulation,
  typeForContextKey,
  type EvaluationResult,
} from '@cloud-copilot/iam-simulate';
import { App } from 'aws-cdk-lib';
import { createApp } from '../../../infra/app';
import { resourceTypesOf, supportsConditionKey } from './reference';
import type { Authorization } from './request-context';

/**
 * The stack's IAM policies as `cdk synth` writes them, with CloudFormation's intrinsics resolved
 * to one deployment's values, and the evaluation of a request against them.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface Statement {
  readonly Sid?: string;
  readonly Effect: string;
  readonly Action: string | string[];
  readonly Resource: Json;
  readonly Condition?: Record<string, Record<string, Json>>;
}

export interface PolicyDocument {
  readonly Version: string;
  readonly Statement: Statement[];
}

interface CfnResource {
  readonly Type: string;
  readonly Properties?: Record<string, Json>;
}

export interface Synthesised {
  readonly resources: Readonly<Record<string, CfnResource>>;
  /** The context the app was synthesised with. */
  readonly context: Readonly<Record<string, string>>;
}

/** The settings the tests' world runs with (kit/aws-cluster.ts, runtime-world.ts). */
export const synthContext = {
  clusterName: 'test-cluster',
  // Stands for the cluster VPC: `Deployment.vpcId` takes its place.
  vpcId: 'vpc-0123456789abcdef0',
  nodeSecurityGroupIds: 'sg-0123456789abcdef0',
  lifecycleEventBus: 'create',
} as const;

/** Synthesises the real app, as `cdk synth` does (without bundling the functions). */
export function synthesise(context: Readonly<Record<string, string>> = synthContext): Synthesised {
  const outdir = mkdtempSync(join(tmpdir(), 'cdk-iam-'));
  try {
    const app = new App({ outdir, context: { ...context, 'aws:cdk:bundling-stacks': [] } });
    const { stack } = createApp(app);
    const template = app.synth().getStackArtifact(stack.artifactId).template as {
      Resources: Record<string, CfnResource>;
    };
    return { resources: template.Resources, context };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

/** The policy documents attached to a role (by logical ID prefix) or standing alone (managed). */
export function policiesOf(synthesised: Synthesised, logicalIdPrefix: string): PolicyDocument[] {
  const refersTo = (value: Json | undefined) =>
    JSON.stringify(value ?? null).includes(`"${logicalIdPrefix}`);
  return Object.entries(synthesised.resources).flatMap(([id, resource]) => {
    const properties = resource.Properties ?? {};
    const attached =
      (resource.Type === 'AWS::IAM::Policy' && refersTo(properties.Roles)) ||
      (resource.Type === 'AWS::IAM::ManagedPolicy' && id.startsWith(logicalIdPrefix));
    return attached ? [properties.PolicyDocument as unknown as PolicyDocument] : [];
  });
}

/** Where a deployment puts the stack: the values CloudFormation would resolve. */
export interface Deployment {
  readonly account: string;
  readonly region: string;
  /** The cluster VPC (the stack's vpcId setting). */
  readonly vpcId: string;
  /** Physical names of the stack's queue, dead-letter queue, table and event bus. */
  readonly workQueue: string;
  /** The node queue; `<workQueue>-node` when the test world has none of its own. */
  readonly nodeQueue?: string;
  readonly deadLetterQueue: string;
  readonly table: string;
  readonly eventBus: string;
}

function physical(
  id: string,
  synthesised: Synthesised,
  deployment: Deployment,
): { type: string; name: string } {
  const resource = synthesised.resources[id];
  if (resource === undefined) throw new Error(`no resource ${id} in the template`);
  const name = (() => {
    switch (resource.Type) {
      case 'AWS::SQS::Queue':
        // The work and node queues have a redrive policy (to the dead-letter queue).
        if (resource.Properties?.RedrivePolicy === undefined) return deployment.deadLetterQueue;
        return id.startsWith('NodeQueue')
          ? (deployment.nodeQueue ?? `${deployment.workQueue}-node`)
          : deployment.workQueue;
      case 'AWS::DynamoDB::Table':
        return deployment.table;
      case 'AWS::Events::EventBus':
        return deployment.eventBus;
      default:
        return id;
    }
  })();
  return { type: resource.Type, name };
}

function arnOfResource(id: string, synthesised: Synthesised, d: Deployment): string {
  const { type, name } = physical(id, synthesised, d);
  const prefix = (service: string) => `arn:aws:${service}:${d.region}:${d.account}:`;
  switch (type) {
    case 'AWS::SQS::Queue':
      return `${prefix('sqs')}${name}`;
    case 'AWS::DynamoDB::Table':
      return `${prefix('dynamodb')}table/${name}`;
    case 'AWS::Events::EventBus':
      return `${prefix('events')}event-bus/${name}`;
    case 'AWS::Logs::LogGroup':
      return `${prefix('logs')}log-group:${name}:*`;
    case 'AWS::IAM::Role':
      return `arn:aws:iam::${d.account}:role/${name}`;
    default:
      throw new Error(`cannot resolve the ARN of ${id} (${type})`);
  }
}

function refOf(id: string, synthesised: Synthesised, d: Deployment): string {
  switch (id) {
    case 'AWS::Partition':
      return 'aws';
    case 'AWS::Region':
      return d.region;
    case 'AWS::AccountId':
      return d.account;
    case 'AWS::URLSuffix':
      return 'amazonaws.com';
  }
  const { type, name } = physical(id, synthesised, d);
  return type === 'AWS::SQS::Queue'
    ? `https://sqs.${d.region}.amazonaws.com/${d.account}/${name}`
    : name;
}

const removed = Symbol('AWS::NoValue');

function text(value: Json): string {
  if (typeof value === 'string' || typeof value === 'number') return String(value);
  throw new Error(`not a string: ${JSON.stringify(value)}`);
}

/** Resolves Ref, Fn::GetAtt, Fn::Join, Fn::Select and Fn::Split; anything else is an error. */
function resolveValue(value: Json, synthesised: Synthesised, d: Deployment): Json | typeof removed {
  if (typeof value === 'string') {
    return value.split(synthesised.context.vpcId ?? '\u0000').join(d.vpcId);
  }
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    return value
      .map((v) => resolveValue(v, synthesised, d))
      .filter((v): v is Json => v !== removed);
  }
  const entries = Object.entries(value);
  const [only] = entries;
  if (entries.length === 1 && only !== undefined && /^(Ref|Fn::)/.test(only[0])) {
    const [fn, args] = only;
    const resolved = (v: Json) => {
      const r = resolveValue(v, synthesised, d);
      if (r === removed) throw new Error(`AWS::NoValue inside ${fn}`);
      return r;
    };
    switch (fn) {
      case 'Ref':
        if (args === 'AWS::NoValue') return removed;
        return refOf(text(args), synthesised, d);
      case 'Fn::GetAtt': {
        const [id, attribute] = args as [string, string];
        if (attribute !== 'Arn') throw new Error(`cannot resolve Fn::GetAtt ${id}.${attribute}`);
        return arnOfResource(id, synthesised, d);
      }
      case 'Fn::Join': {
        const [separator, parts] = args as [string, Json[]];
        return parts.map((p) => text(resolved(p))).join(separator);
      }
      case 'Fn::Select': {
        const [index, list] = args as [number, Json];
        return (resolved(list) as Json[])[Number(index)] ?? null;
      }
      case 'Fn::Split': {
        const [separator, source] = args as [string, Json];
        return text(resolved(source)).split(separator);
      }
      default:
        throw new Error(`cannot resolve ${fn}`);
    }
  }
  return Object.fromEntries(
    entries.flatMap(([k, v]) => {
      const r = resolveValue(v, synthesised, d);
      return r === removed ? [] : [[k, r]];
    }),
  );
}

export function resolvePolicies(
  policies: readonly PolicyDocument[],
  synthesised: Synthesised,
  deployment: Deployment,
): PolicyDocument[] {
  return policies.map(
    (p) => resolveValue(p as unknown as Json, synthesised, deployment) as unknown as PolicyDocument,
  );
}

export function actionsOf(statement: Statement): string[] {
  return Array.isArray(statement.Action) ? statement.Action : [statement.Action];
}

export function resourcesOf(statement: Statement): string[] {
  const r = statement.Resource;
  return (Array.isArray(r) ? r : [r]).map(String);
}

export interface Evaluation {
  readonly decision: EvaluationResult;
  /** The resource type the request was evaluated for, by the reference (or the ELBv2 overlay). */
  readonly resourceType: string;
  /** The allowing statements: Sid, or `#n` in its policy. */
  readonly grantedBy: readonly string[];
}

/**
 * Evaluates one authorization with @cloud-copilot/iam-simulate, which validates the policy, the
 * action, the resource against the action's resource types and the context keys against what the
 * reference lists for them (dropping the others, as AWS would never send them). Where iam-data
 * lacks a V2 resource type of Elastic Load Balancing (reference.ts, `elbv2ResourceTypes`), the
 * same checks are made here and the policy is evaluated without the library's own validation.
 */
export async function evaluate(
  authorization: Authorization,
  policies: readonly PolicyDocument[],
  principal: string,
  account: string,
): Promise<Evaluation> {
  const { action, resource, context } = authorization;
  const types = await resourceTypesOf(action, resource);
  const resourceType = resource === '*' ? '*' : types.map((t) => t.key).join(' | ');
  const identityPolicies = policies.map((policy, i) => ({ name: `policy${i + 1}`, policy }));
  const contextVariables = Object.fromEntries(
    Object.entries(context).map(([k, v]) => [k, typeof v === 'string' ? v : [...v]]),
  );
  const simulation = {
    request: { principal, action, resource: { resource, accountId: account }, contextVariables },
    identityPolicies,
    serviceControlPolicies: [],
    resourceControlPolicies: [],
  };
  const result = await runSimulation(simulation, {});
  if (result.resultType === 'single') {
    const allowing = result.result.analysis.identityAnalysis?.allowStatements ?? [];
    return {
      decision: result.overallResult,
      resourceType,
      grantedBy: allowing.map((s) => s.statement.sid() ?? `#${s.statement.index()}`),
    };
  }
  if (result.resultType === 'wildcard') {
    throw new Error(`${action} on ${resource}: a concrete resource was expected`);
  }
  const overlaid = types.filter((t) => t.fromOverlay);
  if (result.errors.message !== 'no.resource.types' || overlaid.length !== 1) {
    throw new Error(`${action} on ${resource}: ${JSON.stringify(result.errors)}`);
  }
  // The library would drop keys the reference does not list; so do we, with the overlay's type.
  const supported: Record<string, string | string[]> = {};
  for (const [key, value] of Object.entries(contextVariables)) {
    if (!(await supportsConditionKey(action, overlaid[0], key))) continue;
    supported[key] = await normalise(key, value);
  }
  const unsafe = (policyList: typeof identityPolicies) =>
    runUnsafeSimulation(
      {
        ...simulation,
        identityPolicies: policyList,
        request: { ...simulation.request, contextVariables: supported },
      },
      {},
    );
  const decision = unsafe(identityPolicies);
  // Which statements allow it, one at a time (the unchecked evaluation reports no analysis).
  const grantedBy =
    decision !== 'Allowed'
      ? []
      : policies.flatMap((policy, p) =>
          policy.Statement.flatMap((statement, i) =>
            statement.Effect === 'Allow' &&
            unsafe([{ name: `policy${p + 1}`, policy: { ...policy, Statement: [statement] } }]) ===
              'Allowed'
              ? [statement.Sid ?? `#${i + 1}`]
              : [],
          ),
        );
  return { decision, resourceType, grantedBy };
}

async function normalise(key: string, value: string | string[]): Promise<string | string[]> {
  const type = await typeForContextKey(key);
  const array = type.startsWith('ArrayOf');
  if (array) return Array.isArray(value) ? value : [value];
  return Array.isArray(value) ? (value[0] ?? '') : value;
}

export function principalArn(account: string, role: string): string {
  return `arn:aws:iam::${account}:role/${role}`;
}
