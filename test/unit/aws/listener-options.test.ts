import { describe, expect, it } from 'vitest';
import type { NlbClients } from '../../../functions/aws/clients';
import { executePlan } from '../../../functions/nlb/execute';
import { parseAnnotations } from '../../../functions/nlb/model/annotations';
import { buildDesiredLoadBalancer } from '../../../functions/nlb/model/desired';
import { planChanges, type Step } from '../../../functions/nlb/model/plan';
import type { DesiredLoadBalancer, Observed } from '../../../functions/nlb/model/types';
import type { NlbState } from '../../../functions/nlb/nlb-state';
import { TerminalError } from '../../../functions/core/errors';
import type { Service } from '../../../functions/core/objects';
import { makeService } from '../../../kit/core-objects';
import { observedAsBuilt } from '../../support/observed-model';
import { testProviderSettings } from '../../support/nlb-settings';

/**
 * The ALPN policy and listener attributes annotations (issue 20, items 4 and 8): validation, the
 * desired model and the plan. moto refuses ModifyListener on TLS listeners, which AWS accepts, so
 * changing the ALPN policy of an existing listener is covered here with a stubbed ELBv2 client;
 * creating with it and listener attributes are also covered against moto
 * (test/integration/nlb-listeners.test.ts).
 */
const prefix = 'service.beta.kubernetes.io/aws-load-balancer-';
const certificate = 'arn:aws:acm:us-east-1:123456789012:certificate/abc';
const subnets = [{ subnetId: 'subnet-a', availabilityZone: 'us-east-1a' }];
const hosts = [{ name: 'a', providerID: 'aws:///z/i-0000000000000000a', instanceId: 'i-0a' }];

const service = (annotations: Record<string, string>): Service =>
  makeService({ uid: 'uid-1', annotations });
const tls = (extra: Record<string, string> = {}) =>
  service({ [`${prefix}ssl-cert`]: certificate, [`${prefix}ssl-ports`]: 'https', ...extra });

function desiredOf(svc: Service): DesiredLoadBalancer {
  return buildDesiredLoadBalancer({
    service: svc,
    hosts,
    settings: testProviderSettings,
    options: parseAnnotations(svc),
    subnets,
  });
}

function terminalMessage(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(TerminalError);
    return (error as Error).message;
  }
  throw new Error('expected a TerminalError');
}

/** What AWS reports after applying `desired` exactly, listener attributes and ALPN included. */
function observedFrom(desired: DesiredLoadBalancer): Observed {
  return observedAsBuilt(desired, {
    securityGroupIds: [
      'sg-frontend',
      ...(desired.backendSecurityGroupId ? [desired.backendSecurityGroupId] : []),
    ],
    listener: (l) => ({
      certificateArns: l.certificateArns,
      sslPolicy: l.sslPolicy,
      alpnPolicy: l.alpnPolicy,
      attributes: l.attributes,
    }),
  });
}

const listenerSteps = (steps: readonly Step[]) =>
  steps.filter((s) => /Listener/.test(s.kind)).map((s) => s.kind);

describe('annotation aws-load-balancer-alpn-policy', () => {
  it.each(['HTTP1Only', 'HTTP2Only', 'HTTP2Optional', 'HTTP2Preferred', 'None'])(
    'sets %s on the TLS listeners only',
    (policy) => {
      const desired = desiredOf(tls({ [`${prefix}alpn-policy`]: policy }));
      expect(desired.listeners.map((l) => [l.port, l.protocol, l.alpnPolicy])).toEqual([
        [80, 'TCP', undefined],
        [443, 'TLS', policy],
      ]);
    },
  );

  it('refuses a value AWS does not know, naming the ones it does (the names are case-sensitive)', () => {
    const message = terminalMessage(() =>
      parseAnnotations(tls({ [`${prefix}alpn-policy`]: 'http2only' })),
    );
    expect(message).toContain(`annotation ${prefix}alpn-policy: invalid value "http2only"`);
    expect(message).toContain('HTTP1Only, HTTP2Only, HTTP2Optional, HTTP2Preferred or None');
  });

  it('is accepted and has no effect on a Service without TLS listeners, as in aws-load-balancer-controller', () => {
    const desired = desiredOf(service({ [`${prefix}alpn-policy`]: 'HTTP2Preferred' }));
    expect(desired.listeners.every((l) => l.alpnPolicy === undefined)).toBe(true);
  });

  it('is reconciled with ModifyListener, carrying the policy, and an unchanged one plans nothing', async () => {
    const before = desiredOf(tls({ [`${prefix}alpn-policy`]: 'HTTP1Only' }));
    const after = desiredOf(tls({ [`${prefix}alpn-policy`]: 'HTTP2Preferred' }));
    expect(planChanges(before, observedFrom(before)).steps).toEqual([]);
    const plan = planChanges(after, observedFrom(before));
    expect(plan.steps).toEqual([
      { kind: 'modifyListener', arn: 'arn:listener/443', listener: after.listeners[1] },
    ]);

    const sent = await runWithStub(after, plan.steps, observedFrom(before));
    expect(sent.map((c) => c.name)).toEqual(['ModifyListenerCommand']);
    expect(sent[0]?.input).toMatchObject({
      ListenerArn: 'arn:listener/443',
      Protocol: 'TLS',
      AlpnPolicy: ['HTTP2Preferred'],
    });
  });

  it('is left as it is when the annotation is removed (only a set policy is reconciled)', () => {
    const before = desiredOf(tls({ [`${prefix}alpn-policy`]: 'HTTP1Only' }));
    const after = desiredOf(tls());
    expect(planChanges(after, observedFrom(before)).steps).toEqual([]);
  });

  it('goes on CreateListener for a new TLS listener', async () => {
    const desired = desiredOf(tls({ [`${prefix}alpn-policy`]: 'HTTP2Only' }));
    const observed = { ...observedFrom(desired), listeners: [] };
    const plan = planChanges(desired, observed);
    const sent = await runWithStub(desired, plan.steps, observed);
    const creates = sent.filter((c) => c.name === 'CreateListenerCommand');
    expect(creates.map((c) => c.input['AlpnPolicy'])).toEqual([undefined, ['HTTP2Only']]);
  });
});

describe('annotation aws-load-balancer-listener-attributes.<PROTOCOL>-<PORT>', () => {
  const idle = (suffix: string, value: string) => ({
    [`${prefix}listener-attributes.${suffix}`]: value,
  });

  it('puts the attributes on the listener of that protocol and port, and no other', () => {
    const desired = desiredOf(service(idle('TCP-80', 'tcp.idle_timeout.seconds=600')));
    expect(desired.listeners.map((l) => [l.port, l.attributes])).toEqual([
      [80, { 'tcp.idle_timeout.seconds': '600' }],
      [443, undefined],
    ]);
  });

  it.each([
    ['TCP-80', 'tcp.idle_timeout.seconds=59', 'invalid value "59" for tcp.idle_timeout.seconds'],
    ['TCP-80', 'tcp.idle_timeout.seconds=6001', 'from 60 to 6000'],
    ['TCP-80', 'routing.http.xff_header_processing.mode=append', 'unsupported attribute'],
    ['TCP-80', 'tcp.idle_timeout.seconds', 'is not key=value'],
    ['TCP-80', '', 'must list at least one key=value'],
    ['tcp-80', 'tcp.idle_timeout.seconds=600', 'must end in <PROTOCOL>-<PORT>'],
    ['HTTP-80', 'tcp.idle_timeout.seconds=600', 'must end in <PROTOCOL>-<PORT>'],
    ['TCP-70000', 'tcp.idle_timeout.seconds=600', 'must end in <PROTOCOL>-<PORT>'],
    ['TLS-443', 'tcp.idle_timeout.seconds=600', 'only on TCP listeners'],
    ['UDP-53', 'tcp.idle_timeout.seconds=600', 'only on TCP listeners'],
  ])('refuses .%s: %s (%s)', (suffix, value, problem) => {
    const message = terminalMessage(() => parseAnnotations(service(idle(suffix, value))));
    expect(message).toContain(`annotation ${prefix}listener-attributes.${suffix}`);
    expect(message).toContain(problem);
  });

  it('refuses a protocol and port the Service has no listener for, naming the listeners it has', () => {
    const message = terminalMessage(() =>
      desiredOf(tls(idle('TCP-443', 'tcp.idle_timeout.seconds=600'))),
    );
    expect(message).toContain(
      `annotation ${prefix}listener-attributes.TCP-443: the Service has no TCP listener on port 443 (its listeners: TCP-80, TLS-443)`,
    );
  });

  it('on a new listener: ModifyListenerAttributes right after CreateListener, on the ARN it returned', async () => {
    const desired = desiredOf(service(idle('TCP-80', 'tcp.idle_timeout.seconds=600')));
    const observed = { ...observedFrom(desired), listeners: [] };
    const plan = planChanges(desired, observed);
    expect(listenerSteps(plan.steps)).toEqual([
      'createListener',
      'modifyListenerAttributes',
      'createListener',
    ]);
    const sent = await runWithStub(desired, plan.steps, observed);
    expect(sent.map((c) => c.name)).toEqual([
      'CreateListenerCommand',
      'ModifyListenerAttributesCommand',
      'CreateListenerCommand',
    ]);
    expect(sent[1]?.input).toEqual({
      ListenerArn: 'arn:created-listener/80',
      Attributes: [{ Key: 'tcp.idle_timeout.seconds', Value: '600' }],
    });
  });

  it('on an existing listener: only the changed keys, and nothing when they match', () => {
    const before = desiredOf(service(idle('TCP-80', 'tcp.idle_timeout.seconds=600')));
    const after = desiredOf(service(idle('TCP-80', 'tcp.idle_timeout.seconds=900')));
    expect(planChanges(before, observedFrom(before)).steps).toEqual([]);
    expect(planChanges(after, observedFrom(before)).steps).toEqual([
      {
        kind: 'modifyListenerAttributes',
        arn: 'arn:listener/80',
        port: 80,
        attributes: { 'tcp.idle_timeout.seconds': '900' },
      },
    ]);
  });

  it('is not reconciled once the annotation is removed (only listed attributes are)', () => {
    const before = desiredOf(service(idle('TCP-80', 'tcp.idle_timeout.seconds=600')));
    const after = desiredOf(service({}));
    expect(planChanges(after, observedFrom(before)).steps).toEqual([]);
  });
});

interface SentCommand {
  readonly name: string;
  readonly input: Record<string, unknown>;
}

/** Runs plan steps against a stub that records each ELBv2 command and answers creates. */
async function runWithStub(
  desired: DesiredLoadBalancer,
  steps: readonly Step[],
  observed: Observed,
): Promise<SentCommand[]> {
  const sent: SentCommand[] = [];
  const elbv2 = {
    send: (command: { constructor: { name: string }; input: Record<string, unknown> }) => {
      sent.push({ name: command.constructor.name, input: command.input });
      if (command.constructor.name === 'CreateListenerCommand') {
        return Promise.resolve({
          Listeners: [{ ListenerArn: `arn:created-listener/${String(command.input['Port'])}` }],
        });
      }
      return Promise.resolve({});
    },
  };
  const state: NlbState = {};
  await executePlan({
    clients: { elbv2, ec2: elbv2 } as unknown as NlbClients,
    clusterName: testProviderSettings.clusterName,
    service: tls(),
    desired,
    plan: {
      steps,
      keptTargetGroups: Object.fromEntries(
        observed.targetGroups.map((tg) => [tg.arn.slice('arn:tg/'.length), tg.arn]),
      ),
    },
    state,
    securityGroupId: 'sg-frontend',
    loadBalancerArn: 'arn:lb/1',
  });
  return sent;
}
