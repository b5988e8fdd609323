import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { parseAddress } from '../../lib/ip.ts';

/** Only ordinary public unicast: no loopback, private, link-local (cloud metadata), unique-local, CGNAT, reserved. */
export function isPublicAddress(ip: string): boolean {
  const address = parseAddress(ip);
  return address !== undefined && address.range() === 'unicast';
}

export class BlockedAddressError extends Error {
  override readonly name = 'BlockedAddressError';
  readonly code = 'EBLOCKEDADDRESS';
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * A DNS lookup for outgoing connections that refuses names resolving to non-public addresses,
 * checked at connect time so that a name re-pointed after registration (DNS rebinding) fails too.
 */
function guardedLookup(hostname: string, options: { all?: boolean }, callback: LookupCallback): void {
  dnsLookup(hostname, { all: true }, (error, addresses) => {
    if (error) return callback(error, []);
    const blocked = addresses.find((entry) => !isPublicAddress(entry.address));
    if (blocked) {
      return callback(
        new BlockedAddressError(`${hostname} resolves to the non-public address ${blocked.address}`),
        [],
      );
    }
    if (options.all) return callback(null, addresses);
    const [first] = addresses;
    callback(null, first!.address, first!.family);
  });
}

export interface SafeAgentOptions {
  allowPrivateNetworks: boolean;
  timeoutMs: number;
  /** Extra trusted CA certificates (PEM), beside the system ones and NODE_EXTRA_CA_CERTS. */
  ca?: string;
  connections?: number;
}

/** An undici agent for webhook deliveries: keep-alive, bounded, and (unless allowed) public addresses only. */
export function createSafeAgent(options: SafeAgentOptions): Agent {
  const connector = buildConnector({
    timeout: options.timeoutMs,
    ...(options.ca ? { ca: options.ca } : {}),
    ...(options.allowPrivateNetworks ? {} : { lookup: guardedLookup }),
  } as buildConnector.BuildOptions);
  return new Agent({
    connections: options.connections ?? 32,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    connect: (connectOptions, callback) => {
      const host = connectOptions.hostname.replace(/^\[|\]$/g, '');
      // Address literals skip DNS, so they are checked here.
      if (!options.allowPrivateNetworks && isIP(host) && !isPublicAddress(host)) {
        callback(new BlockedAddressError(`${host} is not a public address`), null);
        return;
      }
      connector(connectOptions, callback);
    },
  });
}

/**
 * Why a webhook URL cannot be registered, or undefined when it can: HTTPS only, no credentials,
 * and (unless private networks are allowed) no host that is or resolves to a non-public address.
 * A name that does not resolve now is accepted; every connection checks it again.
 */
export async function webhookUrlProblem(
  raw: string,
  allowPrivateNetworks: boolean,
): Promise<string | undefined> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'url is not a valid URL';
  }
  if (url.protocol !== 'https:') return 'url must use https';
  if (url.username || url.password) return 'url must not contain credentials';
  if (allowPrivateNetworks) return undefined;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host)) return isPublicAddress(host) ? undefined : `url points to the non-public address ${host}`;
  const addresses = await new Promise<LookupAddress[]>((resolve) =>
    dnsLookup(host, { all: true }, (error, found) => resolve(error ? [] : found)),
  );
  const blocked = addresses.find((entry) => !isPublicAddress(entry.address));
  return blocked ? `url resolves to the non-public address ${blocked.address}` : undefined;
}
