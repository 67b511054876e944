import { describe, expect, it } from 'vitest';
import {
  maxMessageBytes,
  parseWorkMessage,
  type ParsedMessage,
  type WorkMessage,
} from '../../../functions/runtime/messages';

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

  it('rejects a body over 16384 bytes before parsing it, and accepts one of exactly 16384', () => {
    const json = JSON.stringify({ v: 1, kind: 'node' });
    const atLimit = json + ' '.repeat(maxMessageBytes - json.length);
    expect(maxMessageBytes).toBe(16384);
    expect(parseWorkMessage(atLimit)).toEqual({ ok: true, message: { v: 1, kind: 'node' } });
    expect(parseWorkMessage(`${atLimit} `)).toEqual({
      ok: false,
      problem: 'larger than 16384 bytes',
    });
    expect(parseWorkMessage('x'.repeat(100_000))).toEqual({
      ok: false,
      problem: 'larger than 16384 bytes',
    });
  });

  it('counts bytes, not characters: 8200 two-byte characters are too large', () => {
    const event = {
      ...failedEvent(),
      detail: { ...failedEvent().detail, reason: 'é'.repeat(8200) },
    };
    const body = JSON.stringify({ v: 1, kind: 'event', event });
    expect(body.length).toBeLessThan(16384);
    expect(parseWorkMessage(body)).toEqual({ ok: false, problem: 'larger than 16384 bytes' });
  });

  it('accepts a queued lifecycle event that matches its schema', () => {
    const body = JSON.stringify({ v: 1, kind: 'event', event: failedEvent() });
    expect(parseWorkMessage(body)).toEqual({
      ok: true,
      message: { v: 1, kind: 'event', event: failedEvent() },
    });
  });

  it('rejects a queued lifecycle event whose detail breaks its schema, naming the field', () => {
    const event = { ...failedEvent(), detail: { ...failedEvent().detail, terminal: 'no' } };
    const body = JSON.stringify({ v: 1, kind: 'event', event });
    expect(problemOf(parseWorkMessage(body))).toMatch(/^event\.detail: terminal: /);
    const unknown = JSON.stringify({
      v: 1,
      kind: 'event',
      event: { ...event, detailType: 'Nope' },
    });
    expect(problemOf(parseWorkMessage(unknown))).toMatch(/^event\.detailType: /);
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
