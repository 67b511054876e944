import { randomInt } from 'node:crypto';
import type {
  BuildHandler,
  BuildHandlerArguments,
  MetadataBearer,
  RetryStrategyV2,
} from '@smithy/types';
import { inject } from 'vitest';
import type { InstrumentableClient } from './aws-calls';

export const testRegion = 'us-east-1';

export interface MotoClientConfig {
  readonly endpoint: string;
  readonly region: string;
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
  readonly maxAttempts: number;
  /** The controller's own retry settings (functions/aws/bounded-retry.ts), for its clients. */
  readonly retryStrategy?: RetryStrategyV2;
  /** Marks a client the test builds for the controller's code (functions/aws/caller-role.ts). */
  readonly userAgentAppId?: string;
}

/**
 * A private AWS account on the shared moto server. moto's reset is global, so instead of resetting,
 * each test file (or test) takes a fresh 12-digit account: moto keeps every account's resources apart.
 */
export class MotoAccount {
  readonly accountId = String(randomInt(100_000_000_000, 999_999_999_999));
  readonly config: MotoClientConfig;

  constructor(endpoint: string = inject('awsEndpoint')) {
    this.config = {
      endpoint,
      region: testRegion,
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
      maxAttempts: 3,
    };
  }

  /** Creates an SDK client bound to this account: `account.client(ElasticLoadBalancingV2Client)`. */
  client<C extends InstrumentableClient>(
    Client: new (config: MotoClientConfig) => C,
    overrides: Partial<MotoClientConfig> = {},
  ): C {
    return this.bind(new Client({ ...this.config, ...overrides }));
  }

  /** Routes an existing client's requests to this account. */
  bind<C extends InstrumentableClient>(client: C): C {
    client.middlewareStack.add(
      (next: BuildHandler<object, MetadataBearer>) => (args: BuildHandlerArguments<object>) => {
        const request = args.request as { headers?: Record<string, string> };
        if (request.headers) request.headers['x-moto-account-id'] = this.accountId;
        return next(args);
      },
      { step: 'build', name: 'motoAccount' },
    );
    return client;
  }
}
