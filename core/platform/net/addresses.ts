/**
 * Which network addresses are public: loopback, private, link-local (cloud metadata), unique-local, multicast,
 * unspecified and reserved ranges are not, for IPv4 and IPv6, including IPv4 embedded in IPv6 (mapped,
 * compatible, NAT64, 6to4). Used by the SSRF guard (core/platform/net/ssrf.ts), which every fetch of a URL a tenant or
 * client chose goes through.
 */
import net from 'node:net';

/** [network, prefix length] of IPv4 ranges that are not publicly routable. */
const BLOCKED_V4: [string, number][] = [
  ['0.0.0.0', 8], // "this network", incl. the unspecified 0.0.0.0
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata 169.254.169.254
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, incl. broadcast
];

const BLOCKED_V6: [string, number][] = [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['2001::', 23], // IETF protocol assignments (Teredo, ORCHID, ...)
  ['fc00::', 7], // unique-local (also fd00:ec2::254, the AWS IPv6 metadata address)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
];

function v4Bytes(ip: string): number[] {
  return ip.split('.').map((p) => Number(p));
}

/** 16 bytes of an IPv6 address (already validated by net.isIPv6); a dotted-quad tail is allowed. */
function v6Bytes(ip: string): number[] {
  let s = ip.split('%')[0]!;
  const lastColon = s.lastIndexOf(':');
  const last = s.slice(lastColon + 1);
  if (last.includes('.')) {
    const [a, b, c, d] = v4Bytes(last) as [number, number, number, number];
    s = `${s.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const groups = (part: string) => (part ? part.split(':').map((h) => parseInt(h, 16)) : []);
  const [head = '', rest] = s.split('::');
  const h = groups(head);
  const all = rest === undefined ? h : [...h, ...new Array<number>(8 - h.length - groups(rest).length).fill(0), ...groups(rest)];
  return all.flatMap((g) => [(g >> 8) & 0xff, g & 0xff]);
}

function inPrefix(addr: number[], net: number[], bits: number): boolean {
  for (let i = 0; i < bits; i++) {
    const byte = i >> 3;
    const mask = 0x80 >> (i & 7);
    if ((addr[byte]! & mask) !== (net[byte]! & mask)) return false;
  }
  return true;
}

/** The IPv4 address an IPv6 address carries, when it is one of the embedding forms. */
function embeddedV4(b: number[]): number[] | null {
  const zero = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  if (zero(0, 10) && b[10] === 0xff && b[11] === 0xff) return b.slice(12); // ::ffff:a.b.c.d (mapped)
  if (zero(0, 8) && b[8] === 0xff && b[9] === 0xff && zero(10, 12)) return b.slice(12); // ::ffff:0:a.b.c.d (SIIT translated, ::ffff:0:0/96)
  if (zero(0, 12)) return b.slice(12); // ::a.b.c.d (compatible, deprecated)
  if (inPrefix(b, v6Bytes('64:ff9b::'), 96)) return b.slice(12); // NAT64
  if (inPrefix(b, v6Bytes('64:ff9b:1::'), 48)) return b.slice(12); // local-use NAT64
  if (b[0] === 0x20 && b[1] === 0x02) return b.slice(2, 6); // 6to4
  return null;
}

const forbiddenV4 = (b: number[]) => BLOCKED_V4.some(([n, bits]) => inPrefix(b, v4Bytes(n), bits));

/** True when the address must not be fetched on a client's behalf. Non-IP strings count as forbidden. */
export function isForbiddenAddress(ip: string): boolean {
  const kind = net.isIP(ip.split('%')[0]!);
  if (kind === 4) return forbiddenV4(v4Bytes(ip));
  if (kind !== 6) return true;
  const b = v6Bytes(ip);
  if (BLOCKED_V6.some(([n, bits]) => inPrefix(b, v6Bytes(n), bits))) return true;
  const v4 = embeddedV4(b);
  return v4 ? forbiddenV4(v4) : false;
}
