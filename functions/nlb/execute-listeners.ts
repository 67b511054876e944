import {
  AddListenerCertificatesCommand,
  CreateListenerCommand,
  DeleteListenerCommand,
  ModifyListenerAttributesCommand,
  ModifyListenerCommand,
  RemoveListenerCertificatesCommand,
  type Action,
  type ProtocolEnum,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { InvariantError } from '../core/errors';
import type { Step } from './model/plan';
import { resourceTags } from './model/naming';
import type { DesiredListener } from './model/types';
import { noteCreated } from './nlb-state';
import { tagList, type PlanRun } from './execute-run';

// Listeners: each forwarding to its target group, with certificates, TLS and ALPN policies, and
// attributes.

export type ListenerStep = Extract<
  Step,
  {
    kind:
      | 'createListener'
      | 'modifyListenerAttributes'
      | 'modifyListener'
      | 'addListenerCertificates'
      | 'removeListenerCertificates'
      | 'deleteListener';
  }
>;

export async function applyListenerStep(run: PlanRun, step: ListenerStep): Promise<void> {
  const { state } = run.request;
  switch (step.kind) {
    case 'createListener': {
      const listener = step.listener;
      const created = await run.elbv2.send(
        new CreateListenerCommand({
          LoadBalancerArn: run.requireLoadBalancer(),
          ...listenerFields(run, listener),
          // Ownership tags on listeners too, so IAM can limit listener changes to ours.
          Tags: tagList(
            resourceTags(
              run.request.clusterName,
              run.request.service,
              `listener:${listener.port}`,
              {},
            ),
          ),
        }),
      );
      const arn = created.Listeners?.[0]?.ListenerArn;
      noteCreated(state, arn, run.now());
      if (arn !== undefined) run.createdListenerArns.set(listener.port, arn);
      await addExtraCertificates(run, arn, listener);
      return;
    }
    case 'modifyListenerAttributes': {
      const arn = step.arn ?? run.createdListenerArns.get(step.port);
      if (arn === undefined)
        throw new InvariantError(`no listener on port ${step.port} for its attributes`);
      await run.elbv2.send(
        new ModifyListenerAttributesCommand({
          ListenerArn: arn,
          Attributes: Object.entries(step.attributes).map(([Key, Value]) => ({ Key, Value })),
        }),
      );
      return;
    }
    case 'modifyListener':
      await run.elbv2.send(
        new ModifyListenerCommand({
          ListenerArn: step.arn,
          ...listenerFields(run, step.listener),
        }),
      );
      return;
    case 'addListenerCertificates':
      await run.elbv2.send(
        new AddListenerCertificatesCommand({
          ListenerArn: step.arn,
          Certificates: step.certificateArns.map((CertificateArn) => ({ CertificateArn })),
        }),
      );
      return;
    case 'removeListenerCertificates':
      await run.elbv2.send(
        new RemoveListenerCertificatesCommand({
          ListenerArn: step.arn,
          Certificates: step.certificateArns.map((CertificateArn) => ({ CertificateArn })),
        }),
      );
      return;
    case 'deleteListener':
      await run.elbv2.send(new DeleteListenerCommand({ ListenerArn: step.arn }));
      return;
  }
}

function listenerFields(run: PlanRun, listener: DesiredListener) {
  const action: Action = {
    Type: 'forward',
    TargetGroupArn: run.targetGroupArn(listener.targetGroupKey),
  };
  const [defaultCertificate] = listener.certificateArns;
  return {
    Port: listener.port,
    Protocol: listener.protocol as ProtocolEnum,
    DefaultActions: [action],
    ...(defaultCertificate ? { Certificates: [{ CertificateArn: defaultCertificate }] } : {}),
    ...(listener.sslPolicy ? { SslPolicy: listener.sslPolicy } : {}),
    ...(listener.alpnPolicy ? { AlpnPolicy: [listener.alpnPolicy] } : {}),
  };
}

async function addExtraCertificates(
  run: PlanRun,
  arn: string | undefined,
  listener: DesiredListener,
): Promise<void> {
  const extra = listener.certificateArns.slice(1);
  if (arn === undefined || extra.length === 0) return;
  await run.elbv2.send(
    new AddListenerCertificatesCommand({
      ListenerArn: arn,
      Certificates: extra.map((CertificateArn) => ({ CertificateArn })),
    }),
  );
}
