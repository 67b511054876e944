import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { countCalls, flushMetrics, powertoolsMetrics } from '../../../functions/wiring/wiring';

/**
 * What the functions print through Powertools, captured from the streams Powertools writes to:
 * every line must be JSON (CloudWatch Logs Insights reads them), and counting an AWS call or
 * ending an invocation that counted nothing must not warn.
 */
let lines: string[] = [];

function capture(stream: NodeJS.WriteStream) {
  return vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
    lines.push(
      ...String(chunk)
        .split('\n')
        .filter((l) => l.trim() !== ''),
    );
    return true;
  });
}

beforeEach(() => {
  lines = [];
  capture(process.stdout);
  capture(process.stderr);
  vi.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => {
    lines.push(args.map(String).join(' '));
  });
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe('Powertools output', () => {
  it('an AWS call counted by service and operation is one EMF line and no warning', async () => {
    const sqs = new SQSClient({
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    countCalls(sqs, powertoolsMetrics('blue'));
    // Answered before it leaves the process: only the counting is under test.
    sqs.middlewareStack.add(
      () => () => Promise.resolve({ output: { $metadata: {} }, response: {} }),
      {
        step: 'build',
      },
    );
    await sqs.send(new GetQueueUrlCommand({ QueueName: 'work' }));
    expect(lines).toHaveLength(1);
    const emf = JSON.parse(lines[0] ?? '{}') as Record<string, unknown>;
    expect(emf).toMatchObject({
      service: 'controller',
      cluster: 'blue',
      awsService: 'SQS',
      operation: 'GetQueueUrl',
      AwsCalls: 1,
    });
  });

  it('every metric carries its cluster, with or without dimensions of its own', () => {
    const metrics = powertoolsMetrics('green');
    metrics.count('ForwarderHeartbeats');
    metrics.count('RetryableFailures', 1, { class: 'permission' });
    flushMetrics();
    const emf = lines.map(
      (line) =>
        JSON.parse(line) as Record<string, unknown> & {
          _aws: { CloudWatchMetrics: { Dimensions: string[][] }[] };
        },
    );
    expect(emf).toHaveLength(2);
    for (const entry of emf) {
      expect(entry.cluster).toBe('green');
      for (const set of entry._aws.CloudWatchMetrics[0]?.Dimensions ?? [])
        expect(set).toContain('cluster');
    }
  });

  it('an invocation that counted nothing prints nothing when it flushes', () => {
    flushMetrics();
    expect(lines).toEqual([]);
  });

  it('every line is JSON, whatever Powertools has to say (a warning too)', () => {
    // A dimension Powertools refuses makes it warn: through the JSON logger.
    powertoolsMetrics('blue').count('Syncs', 1, { kind: '' });
    powertoolsMetrics('blue').count('Syncs', 1, { kind: 'service', outcome: 'done' });
    flushMetrics();
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(() => JSON.parse(line) as unknown, line).not.toThrow();
    expect(lines.some((l) => l.includes('"level":"WARN"'))).toBe(true);
  });
});
