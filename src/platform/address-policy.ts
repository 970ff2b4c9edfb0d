/**
 * Which IP addresses an outbound request may connect to (docs/decisions.md#outbound-addresses).
 *
 * An allow-list, not a deny-list: only addresses that ipaddr.js classifies as
 * ordinary global `unicast` pass. Everything else is refused: loopback,
 * private (RFC 1918), link-local (169.254/16 with the cloud metadata service
 * 169.254.169.254, fe80::/10), unique-local (fc00::/7, with AWS's
 * fd00:ec2::254), carrier-grade NAT (100.64/10, with Alibaba's metadata
 * 100.100.100.200), "this network" 0/8 (0.0.0.0 reaches the local host on
 * Linux), multicast, broadcast, documentation, benchmarking and the other
 * IANA special-purpose ranges (192.0.0/24 holds Oracle's metadata
 * 192.0.0.192).
 *
 * IPv6 forms that carry an IPv4 address are judged by that address:
 * IPv4-mapped (::ffff:a.b.c.d), the deprecated IPv4-compatible form
 * (::a.b.c.d), well-known-prefix NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
 * Teredo and local-use NAT64 (64:ff9b:1::/48) hide or translate the target
 * in ways we cannot check, so they are refused.
 *
 * Pure, so the domain can apply the same rule when a webhook URL is saved
 * (refusedHost) as the outbound client applies when it connects.
 */
import ipaddr from "ipaddr.js";

/** Why an address is refused (an ipaddr.js range name, or "invalid"); undefined when it may be used. */
export function refusedRange(address: string): string | undefined {
  // A zone id (fe80::1%eth0) only ever qualifies a link-local address.
  const bare = address.includes("%") ? address.slice(0, address.indexOf("%")) : address;
  if (!ipaddr.isValid(bare)) return "invalid";
  return rangeOf(ipaddr.parse(bare));
}

function rangeOf(ip: ipaddr.IPv4 | ipaddr.IPv6): string | undefined {
  if (ip.kind() === "ipv4") {
    const range = (ip as ipaddr.IPv4).range();
    return range === "unicast" ? undefined : range;
  }
  const v6 = ip as ipaddr.IPv6;
  const embedded = embeddedIPv4(v6);
  if (embedded) {
    const inner = rangeOf(embedded);
    return inner === undefined ? undefined : `${inner} (embedded in ${v6.range()})`;
  }
  const range = v6.range();
  return range === "unicast" ? undefined : range;
}

/** The IPv4 address an IPv6 address stands for, in the forms that are plain translations. */
function embeddedIPv4(ip: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const p = ip.parts;
  const v4 = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible; :: and ::1 keep their own meaning)
  if (p[0] === 0 && p[1] === 0 && p[2] === 0 && p[3] === 0 && p[4] === 0) {
    if (p[5] === 0xffff) return v4(p[6]!, p[7]!);
    if (p[5] === 0 && (p[6] !== 0 || p[7]! > 1)) return v4(p[6]!, p[7]!);
  }
  // 64:ff9b::a.b.c.d (RFC 6052 well-known prefix)
  if (p[0] === 0x64 && p[1] === 0xff9b && p[2] === 0 && p[3] === 0 && p[4] === 0 && p[5] === 0) return v4(p[6]!, p[7]!);
  // 2002:AABB:CCDD::/48 (6to4)
  if (p[0] === 0x2002) return v4(p[1]!, p[2]!);
  return undefined;
}

/**
 * Names that reach the local host without asking DNS: localhost and its
 * subdomains (RFC 6761 reserves them for loopback) and the aliases Debian
 * and Ubuntu write into /etc/hosts.
 */
const LOOPBACK_NAMES = new Set(["localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"]);

/**
 * Why a URL's host is refused before any lookup: an IP literal in a refused
 * range, or a name that is the local host by definition. `hostname` is a
 * WHATWG URL's (lower case, IPv4 forms such as 127.1 or 0x7f.1 already
 * normalised, IPv6 in brackets). Any other name is judged only when it is
 * resolved, by the outbound client: at save time it cannot be, without I/O.
 */
export function refusedHost(hostname: string): string | undefined {
  const bare = hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname;
  if (ipaddr.isValid(bare)) return refusedRange(bare);
  const name = bare.endsWith(".") ? bare.slice(0, -1) : bare;
  if (LOOPBACK_NAMES.has(name) || name.endsWith(".localhost")) return "loopback";
  return undefined;
}

/** Whether an address (as a socket reports it) or a listen host is this machine's loopback. */
export function isLoopback(address: string): boolean {
  if (LOOPBACK_NAMES.has(address.toLowerCase())) return true;
  const bare = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address;
  if (!ipaddr.isValid(bare)) return false;
  const ip = ipaddr.process(bare);
  return ip.range() === "loopback";
}
