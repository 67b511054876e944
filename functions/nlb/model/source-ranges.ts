import { joinProblems, quoted } from '../../core/echo';
import { TerminalError } from '../../core/errors';
import type { Service } from '../../core/objects';
import { countProblem, serviceLimits } from '../../core/service-limits';
import { awsPrefix, type LoadBalancerOptions } from './annotation-types';
import { parseIPv4 } from './annotation-values';
import { canonicalIPv6Cidr, hostBitsSet, parseIPv6Cidr } from './ipv6';

export const everywhere = '0.0.0.0/0';
export const everywhereIPv6 = '::/0';

/**
 * The client CIDRs allowed in: spec.loadBalancerSourceRanges, else the legacy annotation, else
 * everyone (over IPv6 too on a dualstack NLB). Each must be a canonical IPv4 CIDR, or on a
 * dualstack NLB an IPv6 CIDR (returned in canonical text, so it compares equal to what EC2 reads
 * back); a typo is reported, never widened or dropped. More ranges than the limit are refused
 * from the count, before any is parsed.
 */
export function sourceRanges(service: Service, options: LoadBalancerOptions): string[] {
  const fromSpec = service.spec?.loadBalancerSourceRanges ?? [];
  const field =
    fromSpec.length > 0
      ? 'spec.loadBalancerSourceRanges'
      : 'annotation service.beta.kubernetes.io/load-balancer-source-ranges';
  const ranges = fromSpec.length > 0 ? fromSpec : (options.sourceRanges ?? []);
  const dualstack = options.ipAddressType === 'dualstack';
  if (ranges.length === 0) return dualstack ? [everywhere, everywhereIPv6] : [everywhere];
  const tooMany = countProblem(field, ranges.length, serviceLimits.sourceRanges);
  if (tooMany !== undefined) throw new TerminalError(tooMany);
  const problems = ranges.flatMap((range) => {
    const trimmed = range.trim();
    const problem = trimmed.includes(':')
      ? ipv6CidrProblem(trimmed, dualstack)
      : cidrProblem(trimmed);
    return problem === undefined ? [] : [`${field}: ${quoted(range)} ${problem}`];
  });
  if (problems.length > 0) throw new TerminalError(joinProblems(problems));
  return [...new Set(ranges.map((range) => canonical(range.trim())))].sort();
}

function canonical(range: string): string {
  const v6 = range.includes(':') ? parseIPv6Cidr(range) : undefined;
  return v6 === undefined ? range : canonicalIPv6Cidr(v6);
}

function ipv6CidrProblem(range: string, dualstack: boolean): string | undefined {
  const cidr = parseIPv6Cidr(range);
  if (cidr === undefined) return 'is not an IPv6 CIDR such as 2600:1f18::/40';
  if (!dualstack) {
    return `is an IPv6 range: an ipv4 load balancer takes IPv4 ranges only; set annotation ${awsPrefix}ip-address-type: dualstack to let IPv6 clients in`;
  }
  if (hostBitsSet(cidr)) return `has host bits set; did you mean ${canonicalIPv6Cidr(cidr)}?`;
  return undefined;
}

function cidrProblem(range: string): string | undefined {
  const [address = '', prefixText, extra] = range.split('/');
  const octets = parseIPv4(address);
  if (
    octets === undefined ||
    prefixText === undefined ||
    extra !== undefined ||
    !/^(0|[1-9]\d?)$/.test(prefixText)
  ) {
    return 'is not an IPv4 CIDR such as 10.0.0.0/8';
  }
  const prefix = Number(prefixText);
  if (prefix > 32) return 'has a prefix longer than 32';
  const value = octets.reduce((acc, octet) => acc * 256 + octet, 0);
  const blockSize = 2 ** (32 - prefix);
  if (value % blockSize !== 0) {
    const network = value - (value % blockSize);
    const canonical = [24, 16, 8, 0]
      .map((shift) => Math.floor(network / 2 ** shift) % 256)
      .join('.');
    return `has host bits set; did you mean ${canonical}/${prefix}?`;
  }
  return undefined;
}
