import { DeleteMessageBatchCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { readNlbState } from '../nlb/nlb-state';
import { wantsLoadBalancer } from '../core/claim';
import type { Service } from '../core/objects';
import type { ControllerConfig } from '../contract/controller-config';
import { Forwarder } from '../forwarder/forwarder';
import type { WiredRuntime } from '../wiring/wiring';
import type { RuntimeLog, RuntimeMetrics } from '../runtime/ports';
import { scheduleTick } from '../runtime/node-sync';
import { processWorkBatch } from '../runtime/work-batch';
import { runSweep } from '../runtime/sweep';
import { createRuntime } from '../wiring/wiring';
import { clientConfig, type AwsAccess } from './aws-resources';

/** One Service as the progress display and `--until-converged` see it. */
export interface ServiceProgress {
  readonly service: string;
  readonly phase: 'pending' | 'provisioning' | 'ready' | 'deleting';
  readonly hostname: string;
  readonly targets: number;
}

const quietMetrics: RuntimeMetrics = { count: () => undefined, milliseconds: () => undefined };

export interface LocalControllerOptions {
  /**
   * The forwarder's own kubeconfig, so it runs as its ServiceAccount would (`--rbac`); by default
   * it shares the one given for the progress display.
   */
  readonly forwarderKubeconfig?: string;
}

/**
 * Every role of the controller in one process, on the same code paths as in AWS: the forwarder
 * watching the cluster, service-sync workers long-polling the work queue and running the Lambda
 * handler's batch processing (with its visibility backoff), the node-sync schedule and the sweep.
 * The functions reach the cluster through `config.kubernetes`; `kubeconfigPath` is the progress
 * display's (and the forwarder's unless it has its own).
 */
export class LocalController {
  readonly runtime: WiredRuntime;
  private readonly forwarder: Forwarder;
  private readonly sqs: SQSClient;
  private readonly api: CoreV1Api;
  private running = false;
  private readonly loops: Promise<void>[] = [];
  private readonly timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly config: ControllerConfig,
    kubeconfigPath: string,
    aws: AwsAccess,
    private readonly log: RuntimeLog,
    options: LocalControllerOptions = {},
  ) {
    this.runtime = createRuntime(config, {
      log,
      metrics: quietMetrics,
      ...(aws.credentials ? { credentials: aws.credentials } : {}),
    });
    this.sqs = new SQSClient(clientConfig(aws));
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfigPath);
    this.api = kubeConfig.makeApiClient(CoreV1Api);
    let forwarderKubeConfig = kubeConfig;
    if (options.forwarderKubeconfig !== undefined) {
      forwarderKubeConfig = new KubeConfig();
      forwarderKubeConfig.loadFromFile(options.forwarderKubeconfig);
    }
    this.forwarder = new Forwarder({
      kubeConfig: forwarderKubeConfig,
      claim: { loadBalancerClass: config.loadBalancerClass, claimClassless: config.claimClassless },
      nodePolicy: config.nodePolicy,
      send: (messages) => this.runtime.queue.send(messages),
      log: (level, message, fields) => log[level](`forwarder: ${message}`, fields),
    });
  }

  start(workers = 2): void {
    this.running = true;
    this.forwarder.start();
    for (let i = 0; i < workers; i++) this.loops.push(this.work());
    // The node-sync schedule: once now, then every minute, as the EventBridge rule does.
    const tick = () =>
      void scheduleTick(this.runtime).catch((error: unknown) =>
        this.log.warn('node-sync tick failed', { error: String(error) }),
      );
    tick();
    this.timers.push(setInterval(tick, 60_000));
    this.timers.push(
      setInterval(
        () =>
          void runSweep(this.runtime).catch((error: unknown) =>
            this.log.warn('sweep failed', { error: String(error) }),
          ),
        this.config.sweepPeriodSeconds * 1000,
      ),
    );
  }

  async stop(): Promise<void> {
    this.running = false;
    for (const timer of this.timers) clearInterval(timer);
    await this.forwarder.stop(5_000);
    await Promise.all(this.loops);
  }

  /** The service-sync function's event source mapping: receive, process, delete what succeeded. */
  private async work(): Promise<void> {
    while (this.running) {
      try {
        const received = await this.sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: this.config.queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
            MessageSystemAttributeNames: ['ApproximateReceiveCount'],
          }),
        );
        const records = (received.Messages ?? []).map((m) => ({
          messageId: m.MessageId ?? '',
          body: m.Body ?? '',
          receiptHandle: m.ReceiptHandle ?? '',
          receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? '1'),
        }));
        if (records.length === 0) continue;
        const result = await processWorkBatch(records, this.runtime);
        const failed = new Set(result.batchItemFailures.map((f) => f.itemIdentifier));
        const done = records.filter((r) => !failed.has(r.messageId));
        if (done.length > 0) {
          await this.sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: this.config.queueUrl,
              Entries: done.map((r, i) => ({ Id: String(i), ReceiptHandle: r.receiptHandle })),
            }),
          );
        }
      } catch (error) {
        if (!this.running) return;
        this.log.warn('work queue poll failed; retrying', { error: String(error) });
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
  }

  /** Each LoadBalancer Service of ours: phase, NLB DNS name, registered targets. */
  async progress(): Promise<ServiceProgress[]> {
    const claim = {
      loadBalancerClass: this.config.loadBalancerClass,
      claimClassless: this.config.claimClassless,
    };
    const services = (await this.api.listServiceForAllNamespaces()).items as Service[];
    const rows: ServiceProgress[] = [];
    for (const service of services) {
      if (!wantsLoadBalancer(service, claim)) continue;
      const key = `${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`;
      const record = await this.runtime.store.getService(key);
      const nlb = readNlbState(record?.provider);
      const targets = new Set(
        Object.values(nlb.targetGroups ?? {}).flatMap((tg) => tg.targets ?? []),
      ).size;
      const hostname = service.status?.loadBalancer?.ingress?.[0]?.hostname ?? '';
      rows.push({
        service: key,
        phase: service.metadata?.deletionTimestamp
          ? 'deleting'
          : hostname !== '' && targets > 0
            ? 'ready'
            : nlb.loadBalancerArn
              ? 'provisioning'
              : 'pending',
        hostname,
        targets,
      });
    }
    return rows.sort((a, b) => a.service.localeCompare(b.service));
  }
}

/** Converged: every LoadBalancer Service has its NLB, targets and status. */
export function converged(rows: readonly ServiceProgress[]): boolean {
  return rows.every((row) => row.phase === 'ready');
}

export function renderProgress(rows: readonly ServiceProgress[]): string {
  if (rows.length === 0) return '  (no LoadBalancer Services of this controller)';
  const header = ['SERVICE', 'PHASE', 'TARGETS', 'NLB DNS NAME'];
  const table = [header, ...rows.map((r) => [r.service, r.phase, String(r.targets), r.hostname])];
  const widths = header.map((_, i) => Math.max(...table.map((row) => (row[i] ?? '').length)));
  return table
    .map((row) => `  ${row.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join('  ')}`.trimEnd())
    .join('\n');
}
