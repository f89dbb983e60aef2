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

/**
 * Brackets off, IPv4-mapped IPv6 back to IPv4, so `[::ffff:127.0.0.1]` is judged as 127.0.0.1. ipaddr.js reads
 * the dotted IPv4-compatible spelling `::a.b.c.d` as IPv4-mapped; a leading `0` makes it parse as what it is,
 * `::/96` (refused by isPublic), so `::8.8.8.8` and `::808:808` are judged alike.
 */
function normalize(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const text = address.replace(/^\[|\]$/g, '');
  const parsed = ipaddr.parse(/^::[^:]*\./.test(text) ? `0${text}` : text);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) return (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed;
}

/** `::/96`, the deprecated IPv4-compatible addresses (RFC 4291 §2.5.5.1): ipaddr.js calls them unicast. */
const IPV4_COMPATIBLE: [ipaddr.IPv6, number] = [ipaddr.IPv6.parse('::'), 96];
/** NAT64's well-known prefix (RFC 6052): the IPv4 address is the last 32 bits. */
const NAT64_WELL_KNOWN: [ipaddr.IPv6, number] = [ipaddr.IPv6.parse('64:ff9b::'), 96];
/** 6to4 (RFC 3056): 2002:wwxx:yyzz::/48 is the site behind the IPv4 address w.x.y.z. */
const SIX_TO_FOUR: [ipaddr.IPv6, number] = [ipaddr.IPv6.parse('2002::'), 16];

const ipv4Of = (high: number, low: number): ipaddr.IPv4 => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);

/**
 * Whether an address is public unicast. IPv6 that embeds an IPv4 address reaches that address (through a
 * NAT64 gateway or a 6to4 relay), so 64:ff9b::/96 and 2002::/16 are as public as the IPv4 address they carry:
 * 64:ff9b::7f00:1 is 127.0.0.1, refused; 64:ff9b::808:808 is 8.8.8.8, allowed (for hosts behind DNS64).
 * Other IPv4-carrying ranges stay refused whatever they carry: ::/96 (deprecated, no longer routed),
 * 64:ff9b:1::/48 (local-use NAT64, RFC 8215: where the IPv4 address sits is the operator's choice),
 * Teredo (2001::/32) and IPv4-translated ::ffff:0:0:0/96 (not `unicast` to ipaddr.js).
 */
function isPublic(address: ipaddr.IPv4 | ipaddr.IPv6): boolean {
  if (address.kind() === 'ipv4') return address.range() === 'unicast';
  const ipv6 = address as ipaddr.IPv6;
  const [, p1 = 0, p2 = 0, , , , p6 = 0, p7 = 0] = ipv6.parts;
  if (ipv6.match(NAT64_WELL_KNOWN)) return ipv4Of(p6, p7).range() === 'unicast';
  if (ipv6.match(SIX_TO_FOUR)) return ipv4Of(p1, p2).range() === 'unicast';
  return ipv6.range() === 'unicast' && !ipv6.match(IPV4_COMPATIBLE);
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

/**
 * `resolve` is the resolver asked for names (the system's; tests give answers of their choosing). Every
 * address of an answer is judged, and the caller gets back only addresses that were: a connection made
 * with this lookup goes to a checked address, and an answer with any forbidden address (a public name
 * that also resolves somewhere private) is refused as a whole.
 */
export function createDestinationGuard(allowlist: readonly string[], resolve: typeof dnsLookup = dnsLookup): DestinationGuard {
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
    if (isPublic(parsed) || allowedByCidr(parsed)) return;
    throw new BlockedDestinationError(host, address);
  }

  const lookup = ((hostname: string, options: unknown, callback: unknown) => {
    const done = (typeof options === 'function' ? options : callback) as (
      error: NodeJS.ErrnoException | null,
      address: string | LookupAddress[],
      family?: number,
    ) => void;
    const opts = (typeof options === 'object' && options !== null ? options : {}) as { all?: boolean; family?: number };
    resolve(hostname, { ...opts, all: true }, (error, addresses) => {
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
