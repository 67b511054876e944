import { joinProblems, quoted } from '../../core/echo';
import { TerminalError } from '../../core/errors';
import type { Service } from '../../core/objects';
import { countProblem, serviceLimits } from '../../core/service-limits';
import { parseIPv4, type LoadBalancerOptions } from './annotations';

export const everywhere = '0.0.0.0/0';

/**
 * The client CIDRs allowed in: spec.loadBalancerSourceRanges, else the legacy annotation, else
 * everyone. Each must be a canonical IPv4 CIDR; a typo is reported, never widened or dropped.
 * More ranges than the limit are refused from the count, before any is parsed.
 */
export function sourceRanges(service: Service, options: LoadBalancerOptions): string[] {
  const fromSpec = service.spec?.loadBalancerSourceRanges ?? [];
  const field =
    fromSpec.length > 0
      ? 'spec.loadBalancerSourceRanges'
      : 'annotation service.beta.kubernetes.io/load-balancer-source-ranges';
  const ranges = fromSpec.length > 0 ? fromSpec : (options.sourceRanges ?? []);
  if (ranges.length === 0) return [everywhere];
  const tooMany = countProblem(field, ranges.length, serviceLimits.sourceRanges);
  if (tooMany !== undefined) throw new TerminalError(tooMany);
  const problems = ranges.flatMap((range) => {
    const problem = cidrProblem(range.trim());
    return problem === undefined ? [] : [`${field}: ${quoted(range)} ${problem}`];
  });
  if (problems.length > 0) throw new TerminalError(joinProblems(problems));
  return [...new Set(ranges.map((range) => range.trim()))].sort();
}
function cidrProblem(range: string): string | undefined {
  if (range.includes(':'))
    return 'is an IPv6 range; only IPv4 Network Load Balancers are supported';
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
