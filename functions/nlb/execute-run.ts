import { CreateTagsCommand, DeleteTagsCommand } from '@aws-sdk/client-ec2';
import { AddTagsCommand, RemoveTagsCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
import { InvariantError } from '../core/errors';
import type { Service } from '../core/objects';
import type { NlbClients } from '../aws/clients';
import type { Plan, ResourceRef } from './model/plan';
import type { DesiredLoadBalancer, Tags } from './model/types';
import { describeElbv2Tags, sortByOwnership } from './ownership';
import { forgetCreated, type NlbState } from './nlb-state';

// What one plan's run knows as it goes (the IDs it created or found), shared by the executors of
// each resource (execute-*.ts).

export interface ExecuteRequest {
  readonly clients: NlbClients;
  readonly clusterName: string;
  readonly service: Service;
  readonly desired: DesiredLoadBalancer;
  readonly plan: Plan;
  /** Mutated as resources are created and deleted, so a failure can report what exists. */
  readonly state: NlbState;
  /** IDs known from observation. */
  readonly securityGroupId?: string | undefined;
  readonly loadBalancerArn?: string | undefined;
  /** The clock (epoch ms) that dates each create in `state.createdAt`; Date.now by default. */
  readonly now?: (() => number) | undefined;
}

export interface CreatedTargetGroup {
  readonly key: string;
  readonly arn: string;
  readonly name: string;
}

export class PlanRun {
  readonly targetGroupArns: Record<string, string>;
  /**
   * Created (or handed back) but not yet checked: CreateTargetGroup returns an existing group of
   * the same name and settings, whoever owns it, so its ARN stays out of state until its tags
   * prove it is ours.
   */
  uncheckedTargetGroups: CreatedTargetGroup[] = [];
  securityGroupId: string | undefined;
  loadBalancerArn: string | undefined;
  /** Listeners created in this run, by port: their attributes follow on these ARNs. */
  readonly createdListenerArns = new Map<number, string>();
  /** Resources a delete answered "not found" for within the window: kept, not proven gone. */
  readonly unproven = new Set<string>();

  constructor(readonly request: ExecuteRequest) {
    this.targetGroupArns = { ...request.plan.keptTargetGroups };
    this.securityGroupId = request.securityGroupId;
    this.loadBalancerArn = request.loadBalancerArn;
  }

  now(): number {
    return (this.request.now ?? Date.now)();
  }

  get elbv2() {
    return this.request.clients.elbv2;
  }

  get ec2() {
    return this.request.clients.ec2;
  }

  /**
   * After a plan that ran to the end, every resource recorded has answered a call naming it (the
   * observation before, or a step since): AWS shows it, so from then on a "not found" for it
   * means gone (deleted by hand, say). Only a group kept by an unproven delete keeps its date.
   */
  settleCreated(): void {
    const { state } = this.request;
    for (const id of Object.keys(state.createdAt ?? {})) {
      if (!this.unproven.has(id)) forgetCreated(state, id);
    }
  }

  record(tg: CreatedTargetGroup): void {
    const { state, desired } = this.request;
    const pods = desired.targetGroups.find((d) => d.key === tg.key)?.targetType === 'ip';
    state.targetGroups = {
      ...state.targetGroups,
      [tg.key]: { arn: tg.arn, name: tg.name, ...(pods ? { targetType: 'ip' } : {}), targets: [] },
    };
  }

  /** A resource whose tags prove it someone else's: nothing of it stays in state. */
  disown(arn: string): void {
    forgetCreated(this.request.state, arn);
  }

  async ownedOf(arns: readonly string[]) {
    const tags = await describeElbv2Tags(this.elbv2, arns);
    return sortByOwnership(arns, tags, this.request.clusterName, this.request.service);
  }

  async tag(resource: ResourceRef, add: Tags, remove: readonly string[]): Promise<void> {
    if (resource.type === 'security-group') {
      const id = this.requireSecurityGroup();
      if (Object.keys(add).length > 0)
        await this.ec2.send(new CreateTagsCommand({ Resources: [id], Tags: tagList(add) }));
      if (remove.length > 0) {
        await this.ec2.send(
          new DeleteTagsCommand({ Resources: [id], Tags: remove.map((Key) => ({ Key })) }),
        );
      }
      return;
    }
    const arn =
      resource.type === 'load-balancer'
        ? this.requireLoadBalancer()
        : this.targetGroupArn(resource.key);
    if (Object.keys(add).length > 0)
      await this.elbv2.send(new AddTagsCommand({ ResourceArns: [arn], Tags: tagList(add) }));
    if (remove.length > 0)
      await this.elbv2.send(new RemoveTagsCommand({ ResourceArns: [arn], TagKeys: [...remove] }));
  }

  securityGroupIds(): string[] {
    const { backendSecurityGroupId: backend, frontendSecurityGroupIds: frontend } =
      this.request.desired;
    return [...(frontend ?? [this.requireSecurityGroup()]), ...(backend ? [backend] : [])];
  }

  targetGroupArn(key: string): string {
    const arn = this.targetGroupArns[key];
    if (arn === undefined) throw new InvariantError(`no target group for ${key} in the plan`);
    return arn;
  }

  requireSecurityGroup(): string {
    if (this.securityGroupId === undefined)
      throw new InvariantError('the plan needs a security group before it has one');
    return this.securityGroupId;
  }

  requireLoadBalancer(): string {
    if (this.loadBalancerArn === undefined)
      throw new InvariantError('the plan needs a load balancer before it has one');
    return this.loadBalancerArn;
  }
}

export function tagList(tags: Tags): { Key: string; Value: string }[] {
  return Object.entries(tags).map(([Key, Value]) => ({ Key, Value }));
}
