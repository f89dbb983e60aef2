import ipaddr from 'ipaddr.js';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';

/**
 * Where task URLs may connect. Only public unicast addresses by default: loopback, private, link-local
 * (cloud metadata lives there), CGNAT, multicast, reserved and the like are refused unless an operator
 * allows a CIDR or a host name (TASK_DESTINATION_ALLOWLIST). Checked at connect time through the
 * resolver, so a name that later resolves somewhere private (DNS rebinding) is refused too.
 */
export interface DestinationGuard {
  /** Throws BlockedDestinationError when the address may not be reached. */
  assertAddressAllowed(address: string, host?: string): void;
  isHostAllowlisted(host: string): boolean;
  /** A drop-in for dns.lookup that refuses forbidden answers; for undici's `connect.lookup`. */
  lookup: typeof dnsLookup;
}

export class BlockedDestinationError extends Error {
  readonly code = 'EBLOCKEDDESTINATION';
  constructor(host: string, address: string) {
    super(`destination ${host}${host === address ? '' : ` (${address})`} is not allowed: it is not a public address`);
    this.name = 'BlockedDestinationError';
  }
}

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** Brackets off, IPv4-mapped IPv6 back to IPv4, so `[::ffff:127.0.0.1]` is judged as 127.0.0.1. */
function normalize(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const parsed = ipaddr.parse(address.replace(/^\[|\]$/g, ''));
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) return (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed;
}

function parseAllowlist(entries: readonly string[]): { cidrs: Cidr[]; hosts: Set<string> } {
  const cidrs: Cidr[] = [];
  const hosts = new Set<string>();
  for (const entry of entries) {
    if (entry.includes('/')) cidrs.push(ipaddr.parseCIDR(entry));
    else if (ipaddr.isValid(entry)) cidrs.push([normalize(entry), normalize(entry).kind() === 'ipv4' ? 32 : 128]);
    else hosts.add(entry.toLowerCase().replace(/\.$/, ''));
  }
  return { cidrs, hosts };
}

export function createDestinationGuard(allowlist: readonly string[]): DestinationGuard {
  const { cidrs, hosts } = parseAllowlist(allowlist);
  const allowedByCidr = (address: ipaddr.IPv4 | ipaddr.IPv6): boolean =>
    cidrs.some(([range, bits]) => range.kind() === address.kind() && address.match(range, bits));
  const isHostAllowlisted = (host: string): boolean =>
    hosts.has(
      host
        .toLowerCase()
        .replace(/^\[|\]$/g, '')
        .replace(/\.$/, ''),
    );

  function assertAddressAllowed(address: string, host = address): void {
    if (isHostAllowlisted(host)) return;
    let parsed: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      parsed = normalize(address);
    } catch {
      throw new BlockedDestinationError(host, address);
    }
    if (parsed.range() === 'unicast' || allowedByCidr(parsed)) return;
    throw new BlockedDestinationError(host, address);
  }

  const lookup = ((hostname: string, options: unknown, callback: unknown) => {
    const done = (typeof options === 'function' ? options : callback) as (
      error: NodeJS.ErrnoException | null,
      address: string | LookupAddress[],
      family?: number,
    ) => void;
    const opts = (typeof options === 'object' && options !== null ? options : {}) as { all?: boolean; family?: number };
    dnsLookup(hostname, { ...opts, all: true }, (error, addresses) => {
      if (error) return done(error, []);
      try {
        for (const { address } of addresses) assertAddressAllowed(address, hostname);
      } catch (blocked) {
        return done(blocked as NodeJS.ErrnoException, []);
      }
      if (opts.all) return done(null, addresses);
      const first = addresses[0];
      if (!first) return done(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), []);
      return done(null, first.address, first.family);
    });
  }) as typeof dnsLookup;

  return { assertAddressAllowed, isHostAllowlisted, lookup };
}

/** A URL's host when it is an IP literal (the resolver is not consulted for those), else undefined. */
export function literalAddress(url: URL): string | undefined {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return isIP(host) ? host : undefined;
}
