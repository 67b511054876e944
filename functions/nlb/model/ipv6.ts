/**
 * IPv6 addresses and CIDRs as numbers, for the checks AWS would otherwise make after our first
 * write: a source range with host bits set, an address outside its subnet.
 */

const groupPattern = /^[0-9a-fA-F]{1,4}$/;

/** The 128-bit value of an IPv6 address in text form (`::` compression allowed), or undefined. */
export function parseIPv6(text: string): bigint | undefined {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groupsOf = (part: string | undefined) => (part ? part.split(':') : []);
  const head = groupsOf(halves[0]);
  const tail = groupsOf(halves[1]);
  const compressed = halves.length === 2;
  const missing = 8 - head.length - tail.length;
  if (compressed ? missing < 1 : missing !== 0) return undefined;
  const groups = [...head, ...Array<string>(compressed ? missing : 0).fill('0'), ...tail];
  if (!groups.every((group) => groupPattern.test(group))) return undefined;
  return groups.reduce((value, group) => (value << 16n) | BigInt(parseInt(group, 16)), 0n);
}

/** RFC 5952 text: lower case, leading zeros dropped, the longest run of zero groups as `::`. */
export function formatIPv6(value: bigint): string {
  const groups = Array.from({ length: 8 }, (_, i) =>
    Number((value >> BigInt(16 * (7 - i))) & 0xffffn),
  );
  let bestStart = -1;
  let bestLength = 1;
  for (let start = 0; start < 8; start++) {
    let length = 0;
    while (start + length < 8 && groups[start + length] === 0) length++;
    if (length > bestLength) [bestStart, bestLength] = [start, length];
  }
  const hex = (list: number[]) => list.map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLength))}`;
}

export interface IPv6Cidr {
  readonly network: bigint;
  readonly prefix: number;
}

/** A CIDR's address and prefix length; the address may have host bits set (see hostBitsSet). */
export function parseIPv6Cidr(text: string): IPv6Cidr | undefined {
  const [address = '', prefixText, extra] = text.split('/');
  if (prefixText === undefined || extra !== undefined) return undefined;
  if (!/^(0|[1-9]\d{0,2})$/.test(prefixText) || Number(prefixText) > 128) return undefined;
  const network = parseIPv6(address);
  return network === undefined ? undefined : { network, prefix: Number(prefixText) };
}

const hostMask = (prefix: number) => (1n << BigInt(128 - prefix)) - 1n;

/** The CIDR with its host bits cleared, in canonical text. */
export function canonicalIPv6Cidr(cidr: IPv6Cidr): string {
  return `${formatIPv6(cidr.network & ~hostMask(cidr.prefix))}/${cidr.prefix}`;
}

export function hostBitsSet(cidr: IPv6Cidr): boolean {
  return (cidr.network & hostMask(cidr.prefix)) !== 0n;
}

/** Whether an address lies in a CIDR given as text (an unparsable CIDR holds nothing). */
export function ipv6InCidr(address: bigint, cidrText: string): boolean {
  const cidr = parseIPv6Cidr(cidrText);
  if (cidr === undefined) return false;
  const mask = ~hostMask(cidr.prefix);
  return (address & mask) === (cidr.network & mask);
}
