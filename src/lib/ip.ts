import ipaddr from 'ipaddr.js';

export type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** Parses `a.b.c.d/n`, `x::y/n` or a bare address (a host route); undefined when malformed. */
export function parseCidr(value: string): Cidr | undefined {
  try {
    if (value.includes('/')) return ipaddr.parseCIDR(value);
    const address = ipaddr.parse(value);
    return [address, address.kind() === 'ipv4' ? 32 : 128];
  } catch {
    return undefined;
  }
}

/** Parses an address, unwrapping IPv4-mapped IPv6 (::ffff:a.b.c.d) so that IPv4 rules apply to it. */
export function parseAddress(value: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  try {
    return ipaddr.process(value);
  } catch {
    return undefined;
  }
}

/**
 * A CIDR wholly inside the IPv4-mapped range (::ffff:0:0/96), such as ::ffff:10.0.0.0/104, as the
 * IPv4 CIDR it stands for (10.0.0.0/8), since clients are compared as IPv4 after parseAddress.
 */
function unmapCidr(cidr: Cidr): Cidr {
  const [address, prefix] = cidr;
  if (address.kind() === 'ipv6' && prefix >= 96 && (address as ipaddr.IPv6).isIPv4MappedAddress()) {
    return [(address as ipaddr.IPv6).toIPv4Address(), prefix - 96];
  }
  return cidr;
}

export function ipInCidrs(ip: string, cidrs: readonly string[]): boolean {
  const address = parseAddress(ip);
  if (!address) return false;
  return cidrs.some((entry) => {
    const parsed = parseCidr(entry.trim());
    if (parsed === undefined) return false;
    const cidr = unmapCidr(parsed);
    return cidr[0].kind() === address.kind() && address.match(cidr);
  });
}
