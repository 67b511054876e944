import { joinProblems } from '../../core/echo';
import { TerminalError } from '../../core/errors';
import { awsPrefix, type LoadBalancerOptions } from './annotation-types';
import { formatIPv6, ipv6InCidr, parseIPv6 } from './ipv6';
import {
  peerKind,
  type DesiredListener,
  type IngressRule,
  type IpAddressType,
  type SubnetRef,
} from './types';

export function ipAddressTypeOf(options: LoadBalancerOptions): IpAddressType {
  return options.ipAddressType ?? 'ipv4';
}

/**
 * The ipv6-addresses annotation as one address per subnet ID. As in aws-load-balancer-controller,
 * each address goes to the subnet whose IPv6 CIDR holds it, so the order does not matter; every
 * subnet must get exactly one. Checked here because AWS would refuse only at CreateLoadBalancer.
 */
export function ipv6AddressesBySubnet(
  options: LoadBalancerOptions,
  subnets: readonly SubnetRef[],
): Map<string, string> {
  const wanted = options.ipv6Addresses;
  const result = new Map<string, string>();
  if (wanted === undefined) return result;
  const name = `annotation ${awsPrefix}ipv6-addresses`;
  if (ipAddressTypeOf(options) !== 'dualstack') {
    throw new TerminalError(`${name} needs annotation ${awsPrefix}ip-address-type: dualstack`);
  }
  if (wanted.length !== subnets.length) {
    throw new TerminalError(
      `${name} lists ${wanted.length} values for ${subnets.length} subnets; give one per subnet`,
    );
  }
  const problems: string[] = [];
  const bySubnet = new Map<string, string[]>(subnets.map((s) => [s.subnetId, []]));
  for (const text of wanted) {
    const address = parseIPv6(text);
    if (address === undefined) continue; // the annotation's own check reported it
    const home = subnets.find((s) => (s.ipv6CidrBlocks ?? []).some((c) => ipv6InCidr(address, c)));
    if (home === undefined) {
      problems.push(
        `${name}: ${text} is in none of the subnets' IPv6 CIDRs (${describe(subnets)})`,
      );
    } else {
      bySubnet.get(home.subnetId)?.push(formatIPv6(address));
    }
  }
  for (const [subnetId, addresses] of bySubnet) {
    if (addresses.length > 1)
      problems.push(`${name}: subnet ${subnetId} gets ${addresses.length} addresses`);
    const [first] = addresses;
    if (first !== undefined) result.set(subnetId, first);
  }
  const without = [...bySubnet].filter(([, addresses]) => addresses.length === 0);
  if (problems.length > 0 || without.length > 0) {
    problems.push(...without.map(([subnetId]) => `${name}: subnet ${subnetId} has none`));
    throw new TerminalError(joinProblems(problems));
  }
  return result;
}

function describe(subnets: readonly SubnetRef[]): string {
  return subnets
    .map((s) => `${s.subnetId} ${(s.ipv6CidrBlocks ?? []).join(' ') || 'without IPv6'}`)
    .join(', ');
}

/**
 * AWS refuses `dualstack` on an NLB with UDP or TCP_UDP listeners unless IPv6 source NAT
 * prefixes are enabled, which this controller does not set up: said before any write.
 */
export function dualstackListenerProblems(
  ipAddressType: IpAddressType,
  listeners: readonly DesiredListener[],
): string[] {
  if (ipAddressType !== 'dualstack') return [];
  const udp = listeners.filter((l) => l.protocol === 'UDP' || l.protocol === 'TCP_UDP');
  if (udp.length === 0) return [];
  const ports = udp.map((l) => `port ${l.port} (${l.protocol})`).join(', ');
  return [
    `annotation ${awsPrefix}ip-address-type: AWS allows a dualstack NLB UDP and TCP_UDP listeners only with IPv6 source NAT (aws-load-balancer-enable-prefix-for-ipv6-source-nat), which is not supported here; ${ports} cannot be served: use ipv4 or TCP ports`,
  ];
}

/**
 * The ICMP rule path MTU discovery needs from a peer: "fragmentation needed" (type 3, code 4)
 * for IPv4, "packet too big" (ICMPv6 type 2, code 0) for IPv6. Without it, clients behind a
 * smaller MTU hang on large responses.
 */
export function pathMtuRule(cidr: string): IngressRule {
  return peerKind(cidr) === 'ipv6'
    ? { protocol: 'icmpv6', fromPort: 2, toPort: 0, cidr }
    : { protocol: 'icmp', fromPort: 3, toPort: 4, cidr };
}

/** AWS counts IPv4 and IPv6 rules apart against the per-group quota (prefix lists with IPv4). */
export function splitByFamily(cidrs: readonly string[]): { ipv4: string[]; ipv6: string[] } {
  return {
    ipv4: cidrs.filter((c) => peerKind(c) !== 'ipv6'),
    ipv6: cidrs.filter((c) => peerKind(c) === 'ipv6'),
  };
}
