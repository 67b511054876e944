import { GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { HttpRequest } from '@smithy/protocol-http';
import { describe, expect, it } from 'vitest';
import { callerRoleOfAppId, callerRoleOption } from '../../../functions/aws/caller-role';

/** The user agent a client sends, read just before the request would leave (it never does). */
async function userAgentOf(client: SQSClient): Promise<string> {
  let seen = '';
  client.middlewareStack.add(
    () => (args) => {
      if (HttpRequest.isInstance(args.request)) {
        seen = `${args.request.headers['user-agent'] ?? ''} ${args.request.headers['x-amz-user-agent'] ?? ''}`;
      }
      throw new Error('stop before sending');
    },
    { step: 'finalizeRequest', priority: 'low', name: 'captureUserAgent' },
  );
  await expect(client.send(new GetQueueUrlCommand({ QueueName: 'q' }))).rejects.toThrow(
    'stop before sending',
  );
  return seen;
}

const offline = {
  region: 'eu-west-1',
  endpoint: 'http://127.0.0.1:9',
  credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
};

describe('caller roles', () => {
  it('reads back the role each option names, and nothing from other app IDs', () => {
    for (const role of ['functions', 'forwarder', 'operator'] as const) {
      expect(callerRoleOfAppId(callerRoleOption(role).userAgentAppId)).toBe(role);
    }
    expect(callerRoleOfAppId('serverless-service-controller-admin')).toBeUndefined();
    expect(callerRoleOfAppId('my-platform-tool')).toBeUndefined();
    expect(callerRoleOfAppId(undefined)).toBeUndefined();
  });

  it('puts the role in the user agent AWS logs (CloudTrail userAgent)', async () => {
    const marked = await userAgentOf(
      new SQSClient({ ...offline, ...callerRoleOption('forwarder') }),
    );
    expect(marked).toContain('app/serverless-service-controller-forwarder');
    const plain = await userAgentOf(new SQSClient(offline));
    expect(plain).not.toContain('serverless-service-controller');
  });

  it('keeps every app ID within the SDK’s 50 characters', () => {
    for (const role of ['functions', 'forwarder', 'operator'] as const) {
      expect(callerRoleOption(role).userAgentAppId.length).toBeLessThanOrEqual(50);
    }
  });
});
