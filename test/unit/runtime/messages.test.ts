import { describe, expect, it } from 'vitest';
import {
  maxMessageBytes,
  parseWorkMessage,
  type ParsedMessage,
  type WorkMessage,
} from '../../../functions/contract/work-messages';

function problemOf(result: ParsedMessage): string {
  if (result.ok) throw new Error(`expected a rejection, got ${JSON.stringify(result.message)}`);
  return result.problem;
}

const label63 = `a${'b'.repeat(61)}c`;

describe('parseWorkMessage', () => {
  it.each<[string, WorkMessage]>([
    ['service', { v: 1, kind: 'service', key: 'default/web' }],
    ['service with a reason', { v: 1, kind: 'service', key: 'default/web', reason: 'updated' }],
    ['hosts', { v: 1, kind: 'hosts', key: 'team-a/api-2', reason: 'hosts changed' }],
    ['resync', { v: 1, kind: 'resync', key: 'kube-system/dns' }],
    ['node', { v: 1, kind: 'node' }],
    ['node tick', { v: 1, kind: 'node', reason: 'tick', chain: 'c0ffee-1234' }],
    ['63-character labels', { v: 1, kind: 'service', key: `${label63}/${label63}` }],
    ['heartbeat', { v: 1, kind: 'heartbeat', sendFailures: 3, pending: 12 }],
    [
      'heartbeat with watch health',
      { v: 1, kind: 'heartbeat', sendFailures: 0, pending: 0, watchFailures: 7, failingWatches: 1 },
    ],
  ])('accepts a %s message', (_label, message) => {
    expect(parseWorkMessage(JSON.stringify(message))).toEqual({ ok: true, message });
  });

  it.each(['', 'hello', '{"v":1,', "{'v':1}", 'undefined'])('rejects %j as not JSON', (body) => {
    expect(parseWorkMessage(body)).toEqual({ ok: false, problem: 'not JSON' });
  });

  it('rejects an unknown kind, naming the kind', () => {
    const problem = problemOf(parseWorkMessage('{"v":1,"kind":"delete","key":"default/web"}'));
    expect(problem).toMatch(/^kind: /);
  });

  it.each([
    ['a negative failure count', '{"v":1,"kind":"heartbeat","sendFailures":-1,"pending":0}'],
    ['a fractional count', '{"v":1,"kind":"heartbeat","sendFailures":0,"pending":1.5}'],
    ['no counts', '{"v":1,"kind":"heartbeat"}'],
    ['a key', '{"v":1,"kind":"heartbeat","sendFailures":0,"pending":0,"key":"default/web"}'],
    [
      'a negative watch failure count',
      '{"v":1,"kind":"heartbeat","sendFailures":0,"pending":0,"watchFailures":-1}',
    ],
    [
      'more failing watches than it could have',
      '{"v":1,"kind":"heartbeat","sendFailures":0,"pending":0,"failingWatches":1000}',
    ],
  ])('rejects a heartbeat with %s', (_label, body) => {
    expect(problemOf(parseWorkMessage(body))).toBeTruthy();
  });

  it('rejects a message without a kind', () => {
    expect(problemOf(parseWorkMessage('{"v":1,"key":"default/web"}'))).toMatch(/^kind: /);
  });

  it.each(['service', 'hosts', 'resync'])('rejects a %s message without a key', (kind) => {
    expect(problemOf(parseWorkMessage(JSON.stringify({ v: 1, kind })))).toMatch(/^key: /);
  });

  it.each([
    'web',
    'default/',
    '/web',
    'default/web/extra',
    'Default/web',
    'default/Web',
    '-default/web',
    'default/web-',
    'default/we_b',
    'default/we.b',
    `${label63}x/web`,
    `default/${label63}x`,
    ' default/web',
  ])('rejects the key %j', (key) => {
    const problem = problemOf(parseWorkMessage(JSON.stringify({ v: 1, kind: 'service', key })));
    expect(problem).toBe('key: namespace/name');
  });

  it('rejects a key that is not a string', () => {
    expect(problemOf(parseWorkMessage('{"v":1,"kind":"hosts","key":42}'))).toMatch(/^key: /);
  });

  it('rejects extra fields', () => {
    const problem = problemOf(
      parseWorkMessage('{"v":1,"kind":"service","key":"default/web","uid":"abc"}'),
    );
    expect(problem).toMatch(/^\(root\): .*"uid"/);
  });

  it('rejects a key on a node message and a chain on a service message', () => {
    expect(problemOf(parseWorkMessage('{"v":1,"kind":"node","key":"default/web"}'))).toMatch(
      /"key"/,
    );
    expect(
      problemOf(parseWorkMessage('{"v":1,"kind":"service","key":"default/web","chain":"c1"}')),
    ).toMatch(/"chain"/);
  });

  it.each([
    ['another version', '{"v":2,"kind":"node"}'],
    ['no version', '{"kind":"node"}'],
    ['the version as a string', '{"v":"1","kind":"node"}'],
  ])('rejects %s', (_label, body) => {
    expect(problemOf(parseWorkMessage(body))).toMatch(/^v: /);
  });

  it('rejects a reason over 200 characters and accepts one of exactly 200', () => {
    const message = (reason: string) =>
      JSON.stringify({ v: 1, kind: 'service', key: 'default/web', reason });
    expect(problemOf(parseWorkMessage(message('r'.repeat(201))))).toMatch(/^reason: /);
    expect(parseWorkMessage(message('r'.repeat(200))).ok).toBe(true);
  });

  it('rejects a chain over 64 characters', () => {
    const body = JSON.stringify({ v: 1, kind: 'node', chain: 'c'.repeat(65) });
    expect(problemOf(parseWorkMessage(body))).toMatch(/^chain: /);
  });

  it('rejects a body over 4096 bytes before parsing it, and accepts one of exactly 4096', () => {
    const json = JSON.stringify({ v: 1, kind: 'node' });
    const atLimit = json + ' '.repeat(maxMessageBytes - json.length);
    expect(maxMessageBytes).toBe(4096);
    expect(parseWorkMessage(atLimit)).toEqual({ ok: true, message: { v: 1, kind: 'node' } });
    expect(parseWorkMessage(`${atLimit} `)).toEqual({
      ok: false,
      problem: 'larger than 4096 bytes',
    });
    expect(parseWorkMessage('x'.repeat(100_000))).toEqual({
      ok: false,
      problem: 'larger than 4096 bytes',
    });
  });

  it('counts bytes, not characters: 2100 two-byte characters are too large', () => {
    const body = JSON.stringify({ v: 1, kind: 'node', reason: 'é'.repeat(2100) });
    expect(body.length).toBeLessThan(4096);
    expect(parseWorkMessage(body)).toEqual({ ok: false, problem: 'larger than 4096 bytes' });
  });

  it('accepts an event message that names a stored lifecycle event by its id', () => {
    const id = '0f8fad5b-d9cb-469f-a165-70867728950e';
    expect(parseWorkMessage(JSON.stringify({ v: 1, kind: 'event', id }))).toEqual({
      ok: true,
      message: { v: 1, kind: 'event', id },
    });
  });

  it('rejects an event message that carries the event itself: the queue is not trusted with events', () => {
    const body = JSON.stringify({ v: 1, kind: 'event', event: failedEvent() });
    expect(problemOf(parseWorkMessage(body))).toMatch(/event/);
    const notAnId = JSON.stringify({ v: 1, kind: 'event', id: 'attacker.example.com' });
    expect(problemOf(parseWorkMessage(notAnId))).toMatch(/^id: /);
  });

  it('keeps the problem it reports short, whatever the message holds', () => {
    const body = JSON.stringify({ v: 1, kind: 'node', ['k'.repeat(3000)]: 1 });
    expect(problemOf(parseWorkMessage(body)).length).toBeLessThanOrEqual(1024);
  });

  it.each([
    'null',
    '[]',
    '"service"',
    '42',
    'true',
    '{}',
    '[{"v":1,"kind":"node"}]',
    '{"__proto__":{"v":1,"kind":"node"}}',
    '{"v":1,"kind":"service","key":null}',
    '{"v":1,"kind":{"toString":1}}',
  ])('returns a problem, never throwing, for %j', (body) => {
    const result = parseWorkMessage(body);
    expect(result.ok).toBe(false);
    expect(problemOf(result)).not.toBe('');
  });
});

function failedEvent() {
  return {
    detailType: 'LoadBalancerSyncFailed' as const,
    detail: {
      schemaVersion: 1 as const,
      eventId: 'e-1',
      occurredAt: '2026-11-30T12:00:00.000Z',
      cluster: 'test',
      correlationId: 'c-1',
      namespace: 'default',
      name: 'web',
      uid: 'u-1',
      reason: 'throttled',
      terminal: false,
      retryInSeconds: 5,
    },
  };
}
