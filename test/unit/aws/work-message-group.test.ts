import { describe, expect, it } from 'vitest';
import { controllerGroups, messageGroupOf } from '../../../functions/contract/work-message-group';
import type { WorkMessage } from '../../../functions/contract/work-messages';

/**
 * AWS's rule for MessageGroupId (SendMessage API reference): 1 to 128 characters, letters, digits
 * and punctuation. moto stores any string, so the rule is checked here on our own groups.
 */
const awsGroupId = /^[A-Za-z0-9!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]{1,128}$/;
const namespaceLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

describe('messageGroupOf', () => {
  it("puts Service work in the Service's namespace, whatever its kind", () => {
    for (const kind of ['service', 'hosts', 'resync'] as const) {
      expect(messageGroupOf({ v: 1, kind, key: 'team-a/web' })).toBe('team-a');
    }
  });

  it('gives the longest namespace Kubernetes allows a valid group', () => {
    const namespace = `n${'x'.repeat(61)}0`;
    const group = messageGroupOf({ v: 1, kind: 'service', key: `${namespace}/web` });
    expect(group).toBe(namespace);
    expect(group).toMatch(awsGroupId);
  });

  it('keeps controller messages in groups no namespace can have, each valid for AWS', () => {
    const messages: WorkMessage[] = [
      { v: 1, kind: 'node', reason: 'tick', chain: 'c-1' },
      { v: 1, kind: 'heartbeat', sendFailures: 0, pending: 3 },
    ];
    expect(messages.map(messageGroupOf)).toEqual([
      controllerGroups.node,
      controllerGroups.heartbeat,
    ]);
    for (const group of Object.values(controllerGroups)) {
      expect(group).toMatch(awsGroupId);
      expect(group).not.toMatch(namespaceLabel);
    }
  });

  it('sends a key that names no namespace to a group of its own, never an invalid group', () => {
    // The send path is typed, but a key is a string: garbage must not become a bad request.
    for (const key of ['no-slash', '/web', 'Team A/web', `${'x'.repeat(200)}/web`]) {
      expect(messageGroupOf({ v: 1, kind: 'service', key })).toBe(controllerGroups.unkeyed);
    }
  });
});
