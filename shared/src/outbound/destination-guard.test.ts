import { describe, expect, it } from '@jest/globals';
import type { lookup, LookupAddress } from 'node:dns';
import { BlockedDestinationError, createDestinationGuard, literalAddress, type DestinationGuard } from './destination-guard.ts';

/** Every spelling of a non-public destination, with the address it stands for. */
const LITERAL_VECTORS: [url: string, normalized: string][] = [
  ['http://127.0.0.1', '127.0.0.1'],
  ['http://127.1', '127.0.0.1'],
  ['http://2130706433', '127.0.0.1'],
  ['http://0x7f000001', '127.0.0.1'],
  ['http://0177.0.0.1', '127.0.0.1'],
  ['http://[::1]', '::1'],
  ['http://[::ffff:127.0.0.1]', '127.0.0.1'],
  ['http://[::ffff:7f00:1]', '127.0.0.1'],
  ['http://0.0.0.0', '0.0.0.0'],
  ['http://10.0.0.1', '10.0.0.1'],
  ['http://172.16.0.1', '172.16.0.1'],
  ['http://192.168.1.1', '192.168.1.1'],
  ['http://169.254.169.254', '169.254.169.254'],
  ['http://100.64.0.1', '100.64.0.1'],
  ['http://224.0.0.1', '224.0.0.1'],
  ['http://[fd00::1]', 'fd00::1'],
  ['http://[fe80::1]', 'fe80::1'],
  ['http://255.255.255.255', '255.255.255.255'],
  ['http://[::]', '::'],
  // IPv4-compatible (::/96, deprecated): refused whatever it carries, public addresses included.
  ['http://[::7f00:2]', '::7f00:2'],
  ['http://[::127.0.0.2]', '::7f00:2'],
  ['http://[::a00:1]', '::a00:1'],
  ['http://[::808:808]', '::808:808'],
  // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carrying a non-public IPv4 address.
  ['http://[64:ff9b::7f00:1]', '64:ff9b::7f00:1'],
  ['http://[64:ff9b::10.0.0.1]', '64:ff9b::a00:1'],
  ['http://[64:ff9b::a9fe:a9fe]', '64:ff9b::a9fe:a9fe'],
  ['http://[2002:7f00:1::1]', '2002:7f00:1::1'],
  ['http://[2002:c0a8:101::]', '2002:c0a8:101::'],
  // Local-use NAT64 (64:ff9b:1::/48): where the IPv4 address sits is the operator's choice, so always refused.
  ['http://[64:ff9b:1::808:808]', '64:ff9b:1::808:808'],
];

const PUBLIC_VECTORS = [
  'http://93.184.216.34',
  'http://[2606:4700::1111]',
  'http://8.8.8.8',
  'http://[2001:4860:4860::8888]',
  // NAT64 and 6to4 of a public IPv4 address (8.8.8.8), as DNS64 answers for an IPv4-only host.
  'http://[64:ff9b::808:808]',
  'http://[2002:808:808::1]',
];

/** Judges a URL the way the task client does for IP literals; returns whether it may be reached. */
function allows(guard: DestinationGuard, url: string): boolean {
  const parsed = new URL(url);
  const literal = literalAddress(parsed);
  if (literal === undefined) throw new Error(`${url} is not an IP literal`);
  try {
    guard.assertAddressAllowed(literal, parsed.hostname);
    return true;
  } catch (error) {
    expect(error).toBeInstanceOf(BlockedDestinationError);
    expect((error as BlockedDestinationError).code).toBe('EBLOCKEDDESTINATION');
    expect((error as Error).message).toContain('is not allowed');
    return false;
  }
}

interface LookupResult {
  error: NodeJS.ErrnoException | null;
  address: string | LookupAddress[] | undefined;
  family: number | undefined;
}

/** The guard's lookup, callback style without options. */
function lookupPlain(guard: DestinationGuard, hostname: string): Promise<LookupResult> {
  return new Promise((resolve) => guard.lookup(hostname, (error, address, family) => resolve({ error, address, family })));
}

/** The guard's lookup, callback style with options (as net.connect calls it). */
function lookupWith(guard: DestinationGuard, hostname: string, options: { all?: boolean; family?: 4 | 6 }): Promise<LookupResult> {
  return new Promise((resolve) =>
    guard.lookup(hostname, options as { all: true }, (error, address) => resolve({ error, address, family: undefined })),
  );
}

describe('literalAddress', () => {
  it.each(LITERAL_VECTORS)('normalises %s (the URL parser canonicalises every IPv4 spelling)', (url, normalized) => {
    // IPv4-mapped IPv6 stays IPv6 in the URL (as ::ffff:7f00:1); the guard maps it back to IPv4 when judging.
    expect(literalAddress(new URL(url))).toBe(url.includes('::ffff:') ? '::ffff:7f00:1' : normalized);
  });

  it('is undefined for host names, which go through the resolver instead', () => {
    expect(literalAddress(new URL('http://localhost:8080/x'))).toBeUndefined();
    expect(literalAddress(new URL('https://tasks.example.com'))).toBeUndefined();
  });
});

describe('assertAddressAllowed with the default (empty) allowlist', () => {
  const guard = createDestinationGuard([]);

  it.each(LITERAL_VECTORS)('refuses %s', (url) => {
    expect(allows(guard, url)).toBe(false);
  });

  it.each(PUBLIC_VECTORS)('allows the public address %s', (url) => {
    expect(allows(guard, url)).toBe(true);
  });

  it.each(['not-an-ip', '', '::ffff:999.0.0.1'])('refuses an unparseable address %j', (address) => {
    expect(() => guard.assertAddressAllowed(address)).toThrow(BlockedDestinationError);
  });

  it.each(['::127.0.0.2', '::10.0.0.1', '::8.8.8.8', '0:0:0:0:0:0:7f00:1', '64:ff9b::127.0.0.1', '64:ff9b::0.0.0.0'])(
    'refuses %s however it is spelled (ipaddr.js alone reads `::a.b.c.d` as IPv4-mapped)',
    (address) => {
      expect(() => guard.assertAddressAllowed(address)).toThrow(BlockedDestinationError);
    },
  );

  it('names the host and the address it resolved to in the error', () => {
    expect(() => guard.assertAddressAllowed('10.1.2.3', 'internal.example.com')).toThrow(
      'destination internal.example.com (10.1.2.3) is not allowed',
    );
  });
});

describe('assertAddressAllowed with an allowlist', () => {
  const allIn = (allowlist: string[]): Record<string, boolean> =>
    Object.fromEntries(LITERAL_VECTORS.map(([url]) => [url, allows(createDestinationGuard(allowlist), url)]));
  const expected = (permitted: (normalized: string) => boolean): Record<string, boolean> =>
    Object.fromEntries(LITERAL_VECTORS.map(([url, normalized]) => [url, permitted(normalized)]));

  it('127.0.0.0/8 permits exactly the IPv4 loopback spellings (mapped forms included), not ::1', () => {
    expect(allIn(['127.0.0.0/8'])).toEqual(expected((address) => address.startsWith('127.')));
    expect(allows(createDestinationGuard(['127.0.0.0/8']), 'http://[::1]')).toBe(false);
  });

  it('10.0.0.0/8 permits exactly 10.0.0.1', () => {
    expect(allIn(['10.0.0.0/8'])).toEqual(expected((address) => address === '10.0.0.1'));
    expect(allows(createDestinationGuard(['10.0.0.0/8']), 'http://10.255.255.255')).toBe(true);
    expect(allows(createDestinationGuard(['10.0.0.0/8']), 'http://11.0.0.1')).toBe(true); // public anyway
  });

  it('a bare address is a single-host CIDR', () => {
    expect(allIn(['169.254.169.254'])).toEqual(expected((address) => address === '169.254.169.254'));
    expect(allows(createDestinationGuard(['169.254.169.254']), 'http://169.254.169.253')).toBe(false);
  });

  it('an IPv6 CIDR permits only IPv6 addresses inside it', () => {
    expect(allIn(['fd00::/8'])).toEqual(expected((address) => address === 'fd00::1'));
  });

  it('::/96, 64:ff9b::/96 and 2002::/16 are IPv6 ranges: an IPv6 CIDR permits them, the IPv4 they carry does not', () => {
    // A CIDR is taken as written: ::/96 covers :: and ::1 too.
    expect(allIn(['::/96'])).toEqual(expected((address) => address.startsWith('::')));
    expect(allIn(['64:ff9b::/96'])).toEqual(expected((address) => address.startsWith('64:ff9b::')));
    expect(allIn(['2002::/16'])).toEqual(expected((address) => address.startsWith('2002:')));
    expect(allows(createDestinationGuard(['127.0.0.0/8']), 'http://[::7f00:1]')).toBe(false);
    expect(allows(createDestinationGuard(['127.0.0.0/8']), 'http://[64:ff9b::7f00:1]')).toBe(false);
  });

  it('a host name permits that name, not the addresses it may stand for', () => {
    const guard = createDestinationGuard(['localhost']);
    expect(allIn(['localhost'])).toEqual(expected(() => false));
    expect(() => guard.assertAddressAllowed('127.0.0.1', 'localhost')).not.toThrow();
    expect(() => guard.assertAddressAllowed('::1', 'LOCALHOST.')).not.toThrow();
    expect(() => guard.assertAddressAllowed('127.0.0.1', 'evil.example.com')).toThrow(BlockedDestinationError);
    expect(guard.isHostAllowlisted('Localhost')).toBe(true);
    expect(guard.isHostAllowlisted('localhost.example.com')).toBe(false);
  });
});

describe('lookup (the resolver hook for undici connect)', () => {
  it('refuses localhost by default, with and without {all: true}', async () => {
    const guard = createDestinationGuard([]);
    const plain = await lookupPlain(guard, 'localhost');
    expect(plain.error).toBeInstanceOf(BlockedDestinationError);
    expect(plain.error?.code).toBe('EBLOCKEDDESTINATION');
    expect(plain.error?.message).toContain('destination localhost (');

    const all = await lookupWith(guard, 'localhost', { all: true });
    expect(all.error).toBeInstanceOf(BlockedDestinationError);
    const family4 = await lookupWith(guard, 'localhost', { family: 4 });
    expect(family4.error).toBeInstanceOf(BlockedDestinationError);
  });

  it.each(LITERAL_VECTORS)('refuses %s when it reaches the resolver as a string', async (_url, normalized) => {
    const guard = createDestinationGuard([]);
    expect((await lookupPlain(guard, normalized)).error).toBeInstanceOf(BlockedDestinationError);
    expect((await lookupWith(guard, normalized, { all: true })).error).toBeInstanceOf(BlockedDestinationError);
  });

  /** A resolver that gives every name this answer (a DNS answer of the test's choosing). */
  const answering = (addresses: LookupAddress[]) =>
    ((_hostname: string, _options: unknown, callback: (error: null, addresses: LookupAddress[]) => void) =>
      callback(null, addresses)) as unknown as typeof lookup;
  const PUBLIC: LookupAddress = { address: '93.184.216.34', family: 4 };
  const PUBLIC_V6: LookupAddress = { address: '2606:4700::1111', family: 6 };

  it.each<[string, LookupAddress[]]>([
    ['public first, private last', [PUBLIC, { address: '10.0.0.1', family: 4 }]],
    ['private first', [{ address: '127.0.0.1', family: 4 }, PUBLIC]],
    ['a metadata address among public ones', [PUBLIC, PUBLIC_V6, { address: '169.254.169.254', family: 4 }]],
    ['IPv6 loopback after IPv4 public', [PUBLIC, { address: '::1', family: 6 }]],
    ['an IPv4-mapped private address', [PUBLIC, { address: '::ffff:192.168.1.1', family: 6 }]],
  ])('refuses a mixed answer (%s) as a whole, with and without {all: true}', async (_label, addresses) => {
    const guard = createDestinationGuard([], answering(addresses));
    expect((await lookupPlain(guard, 'mixed.example.test')).error).toBeInstanceOf(BlockedDestinationError);
    expect((await lookupWith(guard, 'mixed.example.test', { all: true })).error).toBeInstanceOf(BlockedDestinationError);
    expect((await lookupWith(guard, 'mixed.example.test', { family: 4 })).error).toBeInstanceOf(BlockedDestinationError);
  });

  it('gives back every address of an all-public answer, and only those', async () => {
    const guard = createDestinationGuard([], answering([PUBLIC, PUBLIC_V6]));
    expect(await lookupWith(guard, 'public.example.test', { all: true })).toMatchObject({ error: null, address: [PUBLIC, PUBLIC_V6] });
    expect(await lookupPlain(guard, 'public.example.test')).toEqual({ error: null, address: PUBLIC.address, family: 4 });
  });

  it('passes public answers through in the shape the caller asked for', async () => {
    const guard = createDestinationGuard([]);
    expect(await lookupPlain(guard, '93.184.216.34')).toEqual({ error: null, address: '93.184.216.34', family: 4 });
    expect(await lookupPlain(guard, '2606:4700::1111')).toEqual({ error: null, address: '2606:4700::1111', family: 6 });
    const all = await lookupWith(guard, '93.184.216.34', { all: true });
    expect(all.error).toBeNull();
    expect(all.address).toEqual([{ address: '93.184.216.34', family: 4 }]);
  });

  it('permits localhost when the allowlist names the host', async () => {
    const guard = createDestinationGuard(['localhost']);
    const plain = await lookupPlain(guard, 'localhost');
    expect(plain.error).toBeNull();
    expect(['127.0.0.1', '::1']).toContain(plain.address);
    expect(plain.family).toBe(plain.address === '::1' ? 6 : 4);

    const all = await lookupWith(guard, 'localhost', { all: true });
    expect(all.error).toBeNull();
    expect(Array.isArray(all.address)).toBe(true);
    expect((all.address as LookupAddress[]).length).toBeGreaterThan(0);
    for (const { address } of all.address as LookupAddress[]) expect(['127.0.0.1', '::1']).toContain(address);
  });

  it('permits localhost when the allowlist covers its addresses by CIDR, and only then', async () => {
    const loopback = createDestinationGuard(['127.0.0.0/8', '::1/128']);
    expect((await lookupPlain(loopback, 'localhost')).error).toBeNull();
    expect((await lookupWith(loopback, 'localhost', { all: true })).error).toBeNull();
    const elsewhere = createDestinationGuard(['10.0.0.0/8']);
    expect((await lookupPlain(elsewhere, 'localhost')).error).toBeInstanceOf(BlockedDestinationError);
    expect((await lookupWith(elsewhere, 'localhost', { all: true })).error).toBeInstanceOf(BlockedDestinationError);
  });
});
