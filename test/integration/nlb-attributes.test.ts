import {
  DeleteLoadBalancerCommand,
  DescribeLoadBalancerAttributesCommand,
  DescribeLoadBalancersCommand,
  DescribeTargetGroupAttributesCommand,
  ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type {
  HandlerExecutionContext,
  InitializeHandler,
  InitializeHandlerArguments,
  MetadataBearer,
} from '@smithy/types';
import { describe, expect, it } from 'vitest';
import { readNlbState } from '../../functions/nlb/nlb-state';
import { TerminalError } from '../../functions/core/errors';
import type { Service } from '../../functions/core/objects';
import type { ProviderState } from '../../functions/sync/ports';
import { makeService, type ServiceOptions } from '../../kit/core-objects';
import { everythingOfWeb, useNlbProviderWorld } from '../support/nlb-provider-world';

const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;

const nlbWorld = useNlbProviderWorld();

const service = (options: ServiceOptions = {}): Service =>
  makeService({ uid: 'uid-web', ...options });

const ensure = (svc: Service, state?: ProviderState) =>
  nlbWorld.provider.ensureLoadBalancer(svc, nlbWorld.cluster.hosts, state);

function reader(): ElasticLoadBalancingV2Client {
  return nlbWorld.cluster.account.client(ElasticLoadBalancingV2Client);
}

async function loadBalancerAttributes(state: ProviderState): Promise<Record<string, string>> {
  const found = await reader().send(
    new DescribeLoadBalancerAttributesCommand({
      LoadBalancerArn: readNlbState(state).loadBalancerArn,
    }),
  );
  return Object.fromEntries((found.Attributes ?? []).map((a) => [a.Key ?? '', a.Value ?? '']));
}

/** Stickiness of each target group, by Service port. */
async function stickiness(state: ProviderState): Promise<Record<string, string>> {
  const result: Record<string, string> = {};
  for (const [key, tg] of Object.entries(readNlbState(state).targetGroups ?? {})) {
    const found = await reader().send(
      new DescribeTargetGroupAttributesCommand({ TargetGroupArn: tg.arn }),
    );
    const attributes = new Map((found.Attributes ?? []).map((a) => [a.Key, a.Value]));
    result[key] = `${attributes.get('stickiness.enabled')}/${attributes.get('stickiness.type')}`;
  }
  return result;
}

/** `stickiness.enabled` alone: moto keeps the type it had when stickiness is turned off. */
function enabledOnly(found: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(found).map(([k, v]) => [k, v.split('/')[0] ?? '']));
}

async function loadBalancerCount(): Promise<number> {
  const found = await reader().send(new DescribeLoadBalancersCommand({}));
  return found.LoadBalancers?.length ?? 0;
}

/**
 * AWS refuses DeleteLoadBalancer with OperationNotPermitted while deletion protection is on;
 * moto 5.2.1 deletes anyway. This middleware adds AWS's rule in front of moto, reading the
 * attribute from moto itself, so the provider meets the refusal AWS would send.
 */
function enforceDeletionProtection(client: ElasticLoadBalancingV2Client): string[] {
  const refused: string[] = [];
  client.middlewareStack.add(
    (next: InitializeHandler<object, MetadataBearer>, context: HandlerExecutionContext) =>
      async (args: InitializeHandlerArguments<object>) => {
        if (context.commandName === DeleteLoadBalancerCommand.name) {
          const arn = (args.input as { LoadBalancerArn?: string }).LoadBalancerArn;
          const found = await reader().send(
            new DescribeLoadBalancerAttributesCommand({ LoadBalancerArn: arn }),
          );
          const on = found.Attributes?.some(
            (a) => a.Key === 'deletion_protection.enabled' && a.Value === 'true',
          );
          if (on === true) {
            refused.push(arn ?? '');
            throw Object.assign(new Error('Load balancer is protected from deletion'), {
              name: 'OperationNotPermitted',
              Code: 'OperationNotPermitted',
              $fault: 'client',
              $metadata: { httpStatusCode: 400 },
            });
          }
        }
        return next(args);
      },
    { step: 'initialize', name: 'awsDeletionProtectionRule' },
  );
  return refused;
}

describe('aws-load-balancer-attributes against moto', () => {
  it('applies the listed attributes and the legacy aliases to the NLB', async () => {
    const result = await ensure(
      service({
        annotations: {
          [aws('attributes')]:
            'access_logs.s3.enabled=true,access_logs.s3.bucket=nlb-logs,dns_record.client_routing_policy=availability_zone_affinity',
          [aws('access-log-s3-bucket-prefix')]: 'prod/web',
          [aws('cross-zone-load-balancing-enabled')]: 'true',
        },
      }),
    );
    expect(await loadBalancerAttributes(result.state)).toMatchObject({
      'access_logs.s3.enabled': 'true',
      'access_logs.s3.bucket': 'nlb-logs',
      'access_logs.s3.prefix': 'prod/web',
      'dns_record.client_routing_policy': 'availability_zone_affinity',
      'load_balancing.cross_zone.enabled': 'true',
    });
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('reads load balancer attributes on a drift check only when the Service lists some', async () => {
    const plain = await ensure(service());
    nlbWorld.cluster.recorder.reset();
    await ensure(service(), plain.state);
    expect(nlbWorld.cluster.recorder.count('DescribeLoadBalancerAttributes')).toBe(0);
    expect(nlbWorld.cluster.recorder.count('DescribeTargetGroupAttributes')).toBe(0);

    const listed = service({
      annotations: { [aws('attributes')]: 'zonal_shift.config.enabled=true' },
    });
    const changed = await ensure(listed, plain.state);
    nlbWorld.cluster.recorder.reset();
    await ensure(listed, changed.state);
    expect(nlbWorld.cluster.recorder.count('DescribeLoadBalancerAttributes')).toBe(1);
    expect(nlbWorld.cluster.recorder.count('ModifyLoadBalancerAttributes')).toBe(0);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('refuses an alias that contradicts the attributes annotation, creating nothing', async () => {
    const conflicting = service({
      annotations: {
        [aws('attributes')]: 'load_balancing.cross_zone.enabled=false',
        [aws('cross-zone-load-balancing-enabled')]: 'true',
      },
    });
    const error = await ensure(conflicting).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TerminalError);
    expect((error as Error).message).toContain(aws('cross-zone-load-balancing-enabled'));
    expect((error as Error).message).toContain('load_balancing.cross_zone.enabled=false');
    expect(nlbWorld.cluster.recorder.count('CreateLoadBalancer')).toBe(0);
  });

  it('refuses access logs without a bucket', async () => {
    const error = await ensure(
      service({ annotations: { [aws('access-log-enabled')]: 'true' } }),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TerminalError);
    expect((error as Error).message).toContain('access_logs.s3.bucket');
    expect(nlbWorld.cluster.recorder.count('CreateLoadBalancer')).toBe(0);
  });
});

describe('deletion protection against moto (the AWS refusal emulated, moto does not enforce it)', () => {
  const protectedService = service({
    annotations: { [aws('attributes')]: 'deletion_protection.enabled=true' },
  });

  it('stops the delete with a terminal error naming the annotation, deletes nothing and only deregisters the targets', async () => {
    const created = await ensure(protectedService);
    expect(await loadBalancerAttributes(created.state)).toMatchObject({
      'deletion_protection.enabled': 'true',
    });
    nlbWorld.cluster.recorder.reset();
    const error = await nlbWorld.provider
      .ensureLoadBalancerDeleted(protectedService, created.state)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TerminalError);
    expect((error as Error).message).toContain('deletion_protection.enabled=true');
    expect((error as Error).message).toContain(aws('attributes'));
    // The kept NLB's node ports may go to another Service: its targets go (issue 32, finding 2).
    const writes = nlbWorld.cluster.recorder.calls
      .filter((c) => !/^(Describe|Get)/.test(c.operation))
      .map((c) => c.operation);
    expect(writes).toEqual(['DeregisterTargets', 'DeregisterTargets']);
    expect(await loadBalancerCount()).toBe(1);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('finishes the delete once the annotation is gone, turning protection off first', async () => {
    const refused = enforceDeletionProtection(nlbWorld.cluster.clients.elbv2);
    const created = await ensure(protectedService);
    const released = service();
    const result = await nlbWorld.provider.ensureLoadBalancerDeleted(released, created.state);
    expect(refused).toHaveLength(1);
    expect(nlbWorld.cluster.recorder.count('ModifyLoadBalancerAttributes')).toBeGreaterThanOrEqual(
      2,
    );
    expect(result.requeueAfterSeconds).toBeUndefined();
    expect(await loadBalancerCount()).toBe(0);
    nlbWorld.expectedLeft = [];
  });

  it('finishes the delete when the annotation sets deletion_protection.enabled=false', async () => {
    enforceDeletionProtection(nlbWorld.cluster.clients.elbv2);
    const created = await ensure(protectedService);
    const off = service({
      annotations: { [aws('attributes')]: 'deletion_protection.enabled=false' },
    });
    await nlbWorld.provider.ensureLoadBalancerDeleted(off, created.state);
    expect(await loadBalancerCount()).toBe(0);
  });
});

describe('spec.sessionAffinity ClientIP against moto', () => {
  const sticky = (annotations?: Record<string, string>) =>
    service({ spec: { sessionAffinity: 'ClientIP' }, ...(annotations ? { annotations } : {}) });

  it('turns source-IP stickiness on, and off again when affinity goes back to None', async () => {
    const on = await ensure(sticky());
    expect(await stickiness(on.state)).toEqual({ '80': 'true/source_ip', '443': 'true/source_ip' });

    const off = await ensure(service(), on.state);
    expect(enabledOnly(await stickiness(off.state))).toEqual({ '80': 'false', '443': 'false' });
    // Once off, the key is no longer ours: a drift check reads no target group attributes.
    nlbWorld.cluster.recorder.reset();
    await ensure(service(), off.state);
    expect(nlbWorld.cluster.recorder.count('DescribeTargetGroupAttributes')).toBe(0);
    nlbWorld.expectedLeft = everythingOfWeb;
  });

  it('leaves stickiness to the target-group-attributes annotation when it sets stickiness', async () => {
    const result = await ensure(
      sticky({ [aws('target-group-attributes')]: 'stickiness.enabled=false' }),
    );
    expect(enabledOnly(await stickiness(result.state))).toEqual({ '80': 'false', '443': 'false' });
    nlbWorld.expectedLeft = everythingOfWeb;
  });
});
