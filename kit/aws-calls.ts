import { setTimeout as sleep } from 'node:timers/promises';
import type {
  DeserializeHandler,
  DeserializeHandlerArguments,
  HandlerExecutionContext,
  InitializeHandler,
  InitializeHandlerArguments,
  MetadataBearer,
  MiddlewareStack,
} from '@smithy/types';

/** Anything built on the SDK v3 middleware stack (every `@aws-sdk/client-*` client). */
export interface InstrumentableClient {
  readonly middlewareStack: MiddlewareStack<object, MetadataBearer>;
}

export interface AwsCall {
  /** Short service name, e.g. `ElasticLoadBalancingV2`, `EC2`, `SQS`, `DynamoDB`. */
  readonly service: string;
  /** Operation name without the `Command` suffix, e.g. `DescribeLoadBalancers`. */
  readonly operation: string;
}

export type FaultKind = 'throttle' | 'server-error' | 'timeout' | 'latency' | 'error';

export interface FaultRule {
  /** An operation name, or `*` for every operation (of `service`, when given). */
  readonly operation: string;
  readonly service?: string;
  readonly kind: FaultKind;
  /** How many attempts the fault hits before it is spent (default: every attempt). */
  readonly times?: number;
  /** Delay added by a `latency` fault. */
  readonly latencyMs?: number;
  /** For `error`: the AWS error code to answer with (e.g. `DependencyViolation`), as a 400. */
  readonly code?: string;
  /**
   * Hit only this share of matching attempts (0–1), drawn from `random` (give a seeded one for
   * a storm that is the same every run). Missed attempts do not spend `times`.
   */
  readonly probability?: number;
  readonly random?: () => number;
}

interface ActiveFault extends FaultRule {
  remaining: number;
}

/** The error code each service uses for throttling, so callers see what AWS would send. */
const throttlingCodes: Record<string, { name: string; status: number }> = {
  ElasticLoadBalancingV2: { name: 'Throttling', status: 400 },
  EC2: { name: 'RequestLimitExceeded', status: 503 },
  DynamoDB: { name: 'ThrottlingException', status: 400 },
  SQS: { name: 'RequestThrottled', status: 400 },
};

/**
 * Counts AWS calls per operation and injects faults, through SDK middleware, so the code under
 * test keeps its real SDK clients, retry strategy and error classes. `calls` counts what the
 * caller asked for (one per command); `attempts` counts HTTP attempts including SDK retries,
 * which is what AWS throttles on.
 */
/**
 * What every instrumented client also gets: the test run registers its IAM call recording here
 * (test/support/iam/record-calls.ts), the benchmark nothing.
 */
const clientHooks: ((client: InstrumentableClient) => void)[] = [];

export function onAttach(hook: (client: InstrumentableClient) => void): void {
  if (!clientHooks.includes(hook)) clientHooks.push(hook);
}

export class AwsCallRecorder {
  readonly calls: AwsCall[] = [];
  readonly attempts: AwsCall[] = [];
  private faults: ActiveFault[] = [];

  /**
   * Instruments a client; returns it for chaining. When the test run keeps an IAM call log
   * (test/support/iam/call-log.ts), each call's IAM request context is written to it as well.
   */
  attach<T extends InstrumentableClient>(client: T): T {
    for (const hook of clientHooks) hook(client);
    client.middlewareStack.add(
      (next: InitializeHandler<object, MetadataBearer>, context: HandlerExecutionContext) =>
        (args: InitializeHandlerArguments<object>) => {
          this.calls.push(callOf(context));
          return next(args);
        },
      { step: 'initialize', priority: 'high', name: 'awsCallRecorderCalls' },
    );
    client.middlewareStack.add(
      (next: DeserializeHandler<object, MetadataBearer>, context: HandlerExecutionContext) =>
        async (args: DeserializeHandlerArguments<object>) => {
          const call = callOf(context);
          this.attempts.push(call);
          await this.applyFault(call);
          return next(args);
        },
      { step: 'deserialize', priority: 'high', name: 'awsCallRecorderAttempts' },
    );
    return client;
  }

  /** Calls of one operation (optionally of one service), or all calls. */
  count(operation?: string, service?: string): number {
    return this.calls.filter(
      (c) =>
        (operation === undefined || c.operation === operation) &&
        (service === undefined || c.service === service),
    ).length;
  }

  /** `{ "ElasticLoadBalancingV2.DescribeLoadBalancers": 2, ... }`, for tables and assertions. */
  byOperation(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const { service, operation } of this.calls) {
      const key = `${service}.${operation}`;
      counts[key] = (counts[key] ?? 0) + 1;
    }
    return counts;
  }

  injectFault(rule: FaultRule): void {
    this.faults.push({ ...rule, remaining: rule.times ?? Number.POSITIVE_INFINITY });
  }

  clearFaults(): void {
    this.faults = [];
  }

  reset(): void {
    this.calls.length = 0;
    this.attempts.length = 0;
    this.clearFaults();
  }

  private async applyFault(call: AwsCall): Promise<void> {
    const fault = this.faults.find(
      (f) =>
        f.remaining > 0 &&
        (f.operation === '*' || f.operation === call.operation) &&
        (f.service === undefined || f.service === call.service) &&
        (f.probability === undefined || (f.random ?? Math.random)() < f.probability),
    );
    if (fault === undefined) return;
    fault.remaining -= 1;
    switch (fault.kind) {
      case 'latency':
        await sleep(fault.latencyMs ?? 100);
        return;
      case 'throttle': {
        const code = throttlingCodes[call.service] ?? { name: 'ThrottlingException', status: 400 };
        throw injectedError(code.name, code.status, 'client', `Rate exceeded (injected)`);
      }
      case 'server-error':
        throw injectedError('InternalFailure', 500, 'server', 'Internal failure (injected)');
      case 'error':
        throw injectedError(
          fault.code ?? 'ValidationError',
          400,
          'client',
          `${fault.code ?? 'error'} (injected)`,
        );
      case 'timeout': {
        const error = injectedError('TimeoutError', 0, 'client', 'Connection timed out (injected)');
        throw Object.assign(error, { code: 'ETIMEDOUT' });
      }
    }
  }
}

function callOf(context: HandlerExecutionContext): AwsCall {
  return {
    service: (context.clientName ?? 'Unknown').replace(/Client$/, ''),
    operation: (context.commandName ?? 'Unknown').replace(/Command$/, ''),
  };
}

/** Shaped like the SDK's ServiceException: the retry strategy and our adapters classify it by these fields. */
function injectedError(
  name: string,
  httpStatusCode: number,
  fault: 'client' | 'server',
  message: string,
): Error {
  const error = new Error(message);
  error.name = name;
  return Object.assign(error, {
    $fault: fault,
    $metadata: httpStatusCode > 0 ? { httpStatusCode, attempts: 1 } : { attempts: 1 },
    $injected: true,
  });
}
