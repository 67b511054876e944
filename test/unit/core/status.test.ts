import { describe, expect, it } from 'vitest';
import { loadBalancerStatusEqual } from '../../../functions/core/status';

describe('loadBalancerStatusEqual (S12)', () => {
  const lb = { ingress: [{ hostname: 'a.elb.amazonaws.com' }] };

  it('treats absent, empty and empty-ingress statuses as equal', () => {
    expect(loadBalancerStatusEqual(undefined, {})).toBe(true);
    expect(loadBalancerStatusEqual({ ingress: [] }, undefined)).toBe(true);
  });

  it('compares hostname, ip, ipMode and ports', () => {
    expect(loadBalancerStatusEqual(lb, { ingress: [{ hostname: 'a.elb.amazonaws.com' }] })).toBe(
      true,
    );
    expect(loadBalancerStatusEqual(lb, { ingress: [{ hostname: 'b.elb.amazonaws.com' }] })).toBe(
      false,
    );
    expect(
      loadBalancerStatusEqual(
        { ingress: [{ ip: '1.1.1.1' }] },
        { ingress: [{ ip: '1.1.1.1', ipMode: 'Proxy' }] },
      ),
    ).toBe(false);
    expect(
      loadBalancerStatusEqual(
        { ingress: [{ hostname: 'a', ports: [{ port: 80, protocol: 'TCP' }] }] },
        { ingress: [{ hostname: 'a', ports: [{ port: 80, protocol: 'TCP', error: 'Pending' }] }] },
      ),
    ).toBe(false);
  });

  it('is order-sensitive, as upstream’s semantic DeepEqual is', () => {
    const two = [{ ip: '1.1.1.1' }, { ip: '2.2.2.2' }];
    expect(loadBalancerStatusEqual({ ingress: two }, { ingress: [...two].reverse() })).toBe(false);
  });
});
