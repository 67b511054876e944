import { describe, expect, it } from 'vitest';
import { parseAnnotations } from '../../../functions/nlb/model/annotations';
import { sourceRanges } from '../../../functions/nlb/model/source-ranges';
import { TerminalError } from '../../../functions/core/errors';
import { makeService } from '../../../kit/core-objects';

const legacy = 'service.beta.kubernetes.io/load-balancer-source-ranges';
const specField = 'spec.loadBalancerSourceRanges';
const legacyField = `annotation ${legacy}`;

/** sourceRanges for a Service with these spec ranges and legacy annotation. */
function rangesOf(spec: readonly string[] | undefined, annotation?: string): string[] {
  const service = makeService({
    ...(annotation === undefined ? {} : { annotations: { [legacy]: annotation } }),
    ...(spec === undefined ? {} : { spec: { loadBalancerSourceRanges: spec } }),
  });
  return sourceRanges(service, parseAnnotations(service));
}

describe('sourceRanges', () => {
  it('allows everyone (0.0.0.0/0) when neither the spec nor the annotation sets ranges', () => {
    expect(rangesOf(undefined)).toEqual(['0.0.0.0/0']);
    expect(rangesOf([])).toEqual(['0.0.0.0/0']);
    expect(rangesOf([], '')).toEqual(['0.0.0.0/0']);
  });

  it('takes spec.loadBalancerSourceRanges over the legacy annotation', () => {
    expect(rangesOf(['10.0.0.0/8'], '192.168.0.0/16')).toEqual(['10.0.0.0/8']);
  });

  it('does not validate the legacy annotation when the spec ranges win', () => {
    expect(rangesOf(['10.0.0.0/8'], 'not-a-cidr')).toEqual(['10.0.0.0/8']);
  });

  it('falls back to the legacy annotation when the spec has no ranges', () => {
    expect(rangesOf([], '192.168.0.0/16, 10.0.0.0/8')).toEqual(['10.0.0.0/8', '192.168.0.0/16']);
  });

  it('trims, removes duplicates and sorts, so the order in the spec does not matter', () => {
    const expected = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'];
    expect(
      rangesOf(['192.168.0.0/16', ' 10.0.0.0/8', '172.16.0.0/12', '10.0.0.0/8 ', '192.168.0.0/16']),
    ).toEqual(expected);
    expect(rangesOf(['172.16.0.0/12', '10.0.0.0/8', '192.168.0.0/16'])).toEqual(expected);
  });

  it.each(['0.0.0.0/0', '10.0.0.0/8', '203.0.113.7/32', '100.64.0.0/10', '255.255.255.255/32'])(
    'accepts the canonical CIDR %s',
    (cidr) => {
      expect(rangesOf([cidr])).toEqual([cidr]);
    },
  );

  // The network address is the address with the host bits cleared, computed by hand here.
  it.each([
    ['10.1.2.3/8', '10.0.0.0/8'],
    ['192.168.1.77/28', '192.168.1.64/28'],
    ['172.31.255.255/12', '172.16.0.0/12'],
    ['203.0.113.7/31', '203.0.113.6/31'],
    ['1.2.3.4/0', '0.0.0.0/0'],
  ])('reports host bits in %s and suggests %s', (range, canonical) => {
    expect(() => rangesOf([range])).toThrow(TerminalError);
    expect(() => rangesOf([range])).toThrow(
      `${specField}: "${range}" has host bits set; did you mean ${canonical}?`,
    );
  });

  it.each([
    ['::/0', 'is an IPv6 range'],
    ['2001:db8::/32', 'is an IPv6 range'],
    ['garbage', 'is not an IPv4 CIDR'],
    ['', 'is not an IPv4 CIDR'],
    ['10.0.0.0', 'is not an IPv4 CIDR'],
    ['10.0.0/8', 'is not an IPv4 CIDR'],
    ['10.0.0.0/8/8', 'is not an IPv4 CIDR'],
    ['010.0.0.0/8', 'is not an IPv4 CIDR'],
    ['10.0.0.0/x', 'is not an IPv4 CIDR'],
    ['10.0.0.0/-1', 'is not an IPv4 CIDR'],
    ['256.0.0.0/8', 'is not an IPv4 CIDR'],
    ['10.0.300.0/24', 'is not an IPv4 CIDR'],
    ['10.0.0.0/33', 'has a prefix longer than 32'],
    ['10.0.0.0/99', 'has a prefix longer than 32'],
  ])('rejects %j in the spec, naming the field and the value', (range, problem) => {
    expect(() => rangesOf([range])).toThrow(TerminalError);
    expect(() => rangesOf([range])).toThrow(`${specField}: "${range}" ${problem}`);
  });

  it('rejects a bad range in the legacy annotation, naming the annotation and the value', () => {
    expect(() => rangesOf(undefined, '10.0.0.0/8, 2001:db8::/32')).toThrow(
      `${legacyField}: "2001:db8::/32" is an IPv6 range`,
    );
  });

  it('reports every bad range in one error and never drops or widens one', () => {
    expect(() => rangesOf(['10.0.0.0/8', '10.0.0.1/8', 'fd00::/8'])).toThrow(
      new TerminalError(
        `${specField}: "10.0.0.1/8" has host bits set; did you mean 10.0.0.0/8?; ` +
          `${specField}: "fd00::/8" is an IPv6 range: an ipv4 load balancer takes IPv4 ranges only; set annotation service.beta.kubernetes.io/aws-load-balancer-ip-address-type: dualstack to let IPv6 clients in`,
      ),
    );
  });

  // A prefix like /08 is not canonical: EC2 would store /8, and rule comparison would never match.
  it('rejects a prefix with a leading zero, which is not canonical', () => {
    expect(() => rangesOf(['10.0.0.0/08'])).toThrow(TerminalError);
  });

  it('refuses more ranges than the limit from the count, before validating any of them', () => {
    const bad = Array.from({ length: 25_000 }, (_, i) => `not-a-cidr-${i}`);
    expect(() => rangesOf(bad)).toThrow(
      new TerminalError(`${specField} has 25000 entries, over the limit of 1000`),
    );
  });

  it('cuts a long bad range and names at most ten of many', () => {
    const long = `10.0.0.0/${'9'.repeat(5000)}`;
    const bad = [long, ...Array.from({ length: 500 }, (_, i) => `bad-${i}`)];
    let message = '';
    try {
      rangesOf(bad);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain('(5009 characters)');
    expect(message).toContain('and 491 more problems');
    expect(message.length).toBeLessThan(1500);
  });
});
