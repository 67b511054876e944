import { describe, expect, it } from 'vitest';
import { checkpointFor, type CheckpointInput } from '../../../functions/core/checkpoint';
import { canonicalJson, stableHash } from '../../../functions/core/hash';
import { makeService } from '../../../kit/core-objects';

const base: CheckpointInput = {
  service: makeService(),
  hostsHash: 'hosts-1',
  claim: { loadBalancerClass: 'x.io/nlb', claimClassless: true },
  providerFingerprint: 'provider-1',
};

describe('checkpoint', () => {
  it('is the same for the same inputs', () => {
    expect(checkpointFor(base)).toBe(checkpointFor({ ...base, service: makeService() }));
  });

  it.each<[string, Partial<CheckpointInput>]>([
    ['an annotation', { service: makeService({ annotations: { a: 'b' } }) }],
    [
      'a port',
      { service: makeService({ ports: [{ protocol: 'TCP', port: 81, nodePort: 30081 }] }) },
    ],
    [
      'source ranges',
      { service: makeService({ spec: { loadBalancerSourceRanges: ['10.0.0.0/8'] } }) },
    ],
    ['the UID', { service: makeService({ uid: 'uid-2' }) }],
    ['the host set', { hostsHash: 'hosts-2' }],
    ['the provider configuration', { providerFingerprint: 'provider-2' }],
    ['the claim', { claim: { loadBalancerClass: 'y.io/nlb', claimClassless: true } }],
  ])('changes with %s', (_name, change) => {
    expect(checkpointFor({ ...base, ...change })).not.toBe(checkpointFor(base));
  });

  it('ignores status, finalizers, labels and resourceVersion', () => {
    const service = makeService({ hostname: 'x.elb.amazonaws.com', finalizers: ['a/b'] });
    const noisy = {
      ...service,
      metadata: { ...service.metadata, labels: { a: 'b' }, resourceVersion: '999' },
    };
    expect(checkpointFor({ ...base, service: noisy })).toBe(checkpointFor(base));
  });
});

describe('stableHash', () => {
  it('does not depend on key order and drops undefined members', () => {
    expect(stableHash({ a: 1, b: [1, 2], c: undefined })).toBe(stableHash({ b: [1, 2], a: 1 }));
    expect(canonicalJson({ b: 1, a: { d: null, c: 'x' } })).toBe('{"a":{"c":"x","d":null},"b":1}');
  });

  it('distinguishes small differences', () => {
    expect(stableHash(['a', 'b'])).not.toBe(stableHash(['ab']));
    expect(stableHash({ n: 1 })).not.toBe(stableHash({ n: '1' }));
    expect(stableHash('x')).toMatch(/^[0-9a-f]{28}$/);
  });
});
