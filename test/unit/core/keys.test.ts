import { describe, expect, it } from 'vitest';
import { TerminalError } from '../../../functions/core/errors';
import { parseServiceKey, serviceKey } from '../../../functions/core/keys';
import { makeService } from '../../../kit/core-objects';

describe('service keys (S4)', () => {
  it('are namespace/name', () => {
    expect(serviceKey(makeService({ namespace: 'team-a', name: 'web' }))).toBe('team-a/web');
    expect(parseServiceKey('team-a/web')).toEqual({ namespace: 'team-a', name: 'web' });
  });

  it.each(['web', 'a/b/c', '/web', 'team-a/', 'Team/web', `ns/${'x'.repeat(64)}`, '../etc/passwd'])(
    'reject %j with a terminal error',
    (key) => {
      expect(() => parseServiceKey(key)).toThrow(TerminalError);
    },
  );
});
