import { describe, expect, it } from 'vitest';
import {
  maxRecordedTargets,
  readNlbState,
  toProviderState,
} from '../../../functions/nlb/nlb-state';

const ids = (n: number) =>
  Array.from({ length: n }, (_, i) => `i-${i.toString(16).padStart(17, '0')}`);

describe('recorded target lists', () => {
  it('keeps lists up to maxRecordedTargets and leaves longer ones out, so a record stays small at thousands of nodes', () => {
    const state = toProviderState({
      targetGroups: {
        '80/TCP': { arn: 'arn:tg/80', name: 'k8s-80', targets: ids(maxRecordedTargets) },
        '443/TCP': { arn: 'arn:tg/443', name: 'k8s-443', targets: ids(5000) },
      },
    });
    const groups = readNlbState(state).targetGroups ?? {};
    expect(groups['80/TCP']?.targets).toHaveLength(maxRecordedTargets);
    expect(groups['443/TCP']).toEqual({ arn: 'arn:tg/443', name: 'k8s-443' });
    // 5,000 recorded ids would be ~110 KB: over a hundred write units per record write.
    expect(JSON.stringify(state).length).toBeLessThan(30_000);
  });
});
