import { describe, expect, it } from 'vitest';
import { settingsFromContext } from '../../infra/settings';

const context = (values: Record<string, unknown>) => (key: string) => values[key];
const valid = { clusterName: 'demo', vpcId: 'vpc-0123abcd' };

describe('defaultTags at synth', () => {
  it('accepts ordinary tags', () => {
    expect(
      settingsFromContext(context({ ...valid, defaultTags: { team: 'platform' } })).defaultTags,
    ).toEqual({ team: 'platform' });
  });

  // Refused before deploy, not at the functions' start, where every invocation would fail.
  it.each(['elbv2.k8s.aws/cluster', 'Serverless-Service-Controller.io/cluster', 'aws:owner'])(
    'refuses the reserved key %s, naming it',
    (key) => {
      expect(() => settingsFromContext(context({ ...valid, defaultTags: { [key]: 'x' } }))).toThrow(
        `defaultTags: tag key "${key}" is reserved`,
      );
    },
  );
});
