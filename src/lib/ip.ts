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

export function ipInCidrs(ip: string, cidrs: readonly string[]): boolean {
  const address = parseAddress(ip);
  if (!address) return false;
  return cidrs.some((entry) => {
    const cidr = parseCidr(entry);
    return cidr !== undefined && cidr[0].kind() === address.kind() && address.match(cidr);
  });
}
