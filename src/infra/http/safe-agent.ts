import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import { createSecureContext } from 'node:tls';
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
    // One TLS context for every connection: without it each connection builds its own (the CA store
    // and cipher list set up again), which costs more than many requests on it.
    secureContext: createSecureContext(options.ca ? { ca: options.ca } : {}),
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

/** The longest webhook URL accepted, as browsers and most proxies handle it. */
export const MAX_WEBHOOK_URL_LENGTH = 2048;
/** How long registration waits for DNS; a name that has not resolved by then is judged at each connection. */
const LOOKUP_TIMEOUT_MS = 500;

// C0 and C1 control characters and whitespace: the URL parser would drop or escape them, so the
// URL stored would not be the one that was checked.
const FORBIDDEN_IN_URL = /[\p{Cc}\s]/u;

type Lookup = (hostname: string) => Promise<LookupAddress[]>;

// Names that systems map to loopback without asking DNS (/etc/hosts of common distributions), and
// `*.localhost` (RFC 6761): refused by name, whether or not they resolve here at registration.
const LOOPBACK_NAMES = new Set([
  'localhost',
  'localhost.localdomain',
  'localhost4',
  'localhost4.localdomain4',
  'localhost6',
  'localhost6.localdomain6',
  'ip6-localhost',
  'ip6-loopback',
]);

/** A host name as DNS compares it: lowercase, without the one trailing dot of an absolute name. */
function normalizeHost(host: string): string {
  const lower = host.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

function isLoopbackName(host: string): boolean {
  return LOOPBACK_NAMES.has(host) || host.endsWith('.localhost');
}

// Registration asks DNS through c-ares (not getaddrinfo on libuv's thread pool, which slow answers
// would fill, stalling file I/O): one try, bounded; /etc/hosts aliases are caught at each connection.
const registrationResolver = new Resolver({ timeout: LOOKUP_TIMEOUT_MS, tries: 1 });
const systemLookup: Lookup = async (hostname) => {
  const [v4, v6] = await Promise.all([
    registrationResolver.resolve4(hostname).catch(() => []),
    registrationResolver.resolve6(hostname).catch(() => []),
  ]);
  return [...v4.map((address) => ({ address, family: 4 })), ...v6.map((address) => ({ address, family: 6 }))];
};

/**
 * Why a webhook URL cannot be registered, or undefined when it can: HTTPS only, no credentials,
 * and (unless private networks are allowed) no host that is, names (a loopback alias such as
 * `localhost.` or `*.localhost`) or resolves to (any of its addresses) a non-public address.
 * A name that does not resolve now, or not within `timeoutMs` (the request never waits on DNS for
 * longer), is accepted; every connection checks it again.
 */
export async function webhookUrlProblem(
  raw: string,
  allowPrivateNetworks: boolean,
  options: { lookup?: Lookup; timeoutMs?: number } = {},
): Promise<string | undefined> {
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) return `url must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`;
  if (FORBIDDEN_IN_URL.test(raw))
    return 'url is not a valid URL: it contains whitespace or control characters';
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
  if (isLoopbackName(normalizeHost(host))) return `url host ${host} names a non-public address (loopback)`;
  const timeoutMs = options.timeoutMs ?? LOOKUP_TIMEOUT_MS;
  let timer: NodeJS.Timeout | undefined;
  const addresses = await Promise.race([
    (options.lookup ?? systemLookup)(host),
    new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    }),
  ]).finally(() => clearTimeout(timer));
  // Not known yet, as a name that does not resolve: accepted, and every connection checks it again.
  if (addresses === 'timeout') return undefined;
  const blocked = addresses.find((entry) => !isPublicAddress(entry.address));
  return blocked ? `url resolves to the non-public address ${blocked.address}` : undefined;
}
