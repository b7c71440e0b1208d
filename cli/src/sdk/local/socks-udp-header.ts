// The SOCKS5 UDP request header (RFC 1928 §7): every datagram between a SOCKS client and
// its UDP relay is `RSV(2) FRAG(1) ATYP(1) DST.ADDR DST.PORT(2) DATA`, where the address
// is IPv4 (ATYP 1), a length-prefixed domain name (ATYP 3, resolved by the relay) or IPv6
// (ATYP 4). `encodeSocksAddress` is the ATYP+ADDR+PORT part alone, which SOCKS replies
// (BND.ADDR/BND.PORT) share. Decoding never throws: a malformed datagram is a value the
// relay drops and counts. RSV is not checked (clients are known to leave junk there).
import { isIPv4, isIPv6 } from "node:net";

export const SOCKS_ATYP = { ipv4: 1, domain: 3, ipv6: 4 } as const;

export interface SocksUdpDatagram {
  /** Fragment number; 0 is a whole datagram (relays that do not reassemble drop the rest). */
  frag: number;
  /** Dotted IPv4, RFC 5952 IPv6, or a domain name as sent. */
  host: string;
  port: number;
  data: Buffer;
}

export type SocksUdpDecoded = ({ ok: true } & SocksUdpDatagram) | { ok: false; error: string };

/** ATYP + DST.ADDR + DST.PORT for host:port (an IP literal, else a domain name of 1-255 bytes). */
export function encodeSocksAddress(host: string, port: number): Buffer {
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new RangeError(`SOCKS5 address: port must be an integer 0-65535, got ${port}`);
  const ip = ipBytes(host);
  let addr: Buffer;
  if (ip) addr = Buffer.concat([Buffer.from([ip.length === 4 ? SOCKS_ATYP.ipv4 : SOCKS_ATYP.ipv6]), ip]);
  else {
    const name = Buffer.from(host, "utf8");
    if (name.length < 1 || name.length > 255)
      throw new RangeError(
        `SOCKS5 address: a domain name must be 1-255 bytes, got ${name.length} ("${host.slice(0, 40)}")`,
      );
    addr = Buffer.concat([Buffer.from([SOCKS_ATYP.domain, name.length]), name]);
  }
  const p = Buffer.alloc(2);
  p.writeUInt16BE(port);
  return Buffer.concat([addr, p]);
}

/** One datagram with its SOCKS5 UDP header (RSV 0, FRAG `frag`). */
export function encodeSocksUdp(host: string, port: number, data: Uint8Array, frag = 0): Buffer {
  return Buffer.concat([Buffer.from([0, 0, frag & 0xff]), encodeSocksAddress(host, port), data]);
}

export function decodeSocksUdp(buf: Buffer): SocksUdpDecoded {
  const bad = (error: string): SocksUdpDecoded => ({ ok: false, error: `SOCKS5 UDP header: ${error}` });
  if (buf.length < 4) return bad(`${buf.length} bytes, shorter than RSV FRAG ATYP`);
  const frag = buf[2]!;
  const atyp = buf[3]!;
  let host: string;
  let off: number;
  if (atyp === SOCKS_ATYP.ipv4) {
    off = 8;
    if (buf.length < off + 2) return bad("truncated IPv4 DST.ADDR/DST.PORT");
    host = `${buf[4]}.${buf[5]}.${buf[6]}.${buf[7]}`;
  } else if (atyp === SOCKS_ATYP.ipv6) {
    off = 20;
    if (buf.length < off + 2) return bad("truncated IPv6 DST.ADDR/DST.PORT");
    host = formatIpv6(buf.subarray(4, 20));
  } else if (atyp === SOCKS_ATYP.domain) {
    if (buf.length < 5) return bad("missing the domain name length");
    const len = buf[4]!;
    if (len === 0) return bad("empty domain name");
    off = 5 + len;
    if (buf.length < off + 2) return bad("truncated domain DST.ADDR/DST.PORT");
    const name = buf.subarray(5, off);
    if (name.some((b) => b < 0x20 || b === 0x7f)) return bad("control bytes in the domain name");
    host = name.toString("utf8");
  } else return bad(`ATYP ${atyp} is not 1 (IPv4), 3 (domain) or 4 (IPv6)`);
  return { ok: true, frag, host, port: buf.readUInt16BE(off), data: buf.subarray(off + 2) };
}

/** 4 or 16 address bytes of an IP literal (IPv6 may be bracketed or carry a zone), else undefined. */
export function ipBytes(host: string): Buffer | undefined {
  if (isIPv4(host)) return Buffer.from(host.split(".").map(Number));
  const bare = host.replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, "");
  if (!isIPv6(bare)) return undefined;
  const groups = (s: string): number[] =>
    s
      ? s.split(":").flatMap((g) => {
          if (!g.includes(".")) return [parseInt(g, 16)];
          const o = g.split(".").map(Number) as [number, number, number, number];
          return [(o[0] << 8) | o[1], (o[2] << 8) | o[3]];
        })
      : [];
  const gap = bare.indexOf("::");
  const head = groups(gap < 0 ? bare : bare.slice(0, gap));
  const tail = gap < 0 ? [] : groups(bare.slice(gap + 2));
  const all = [...head, ...Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  const out = Buffer.alloc(16);
  all.forEach((g, i) => out.writeUInt16BE(g, i * 2));
  return out;
}

/** RFC 5952 text of 16 IPv6 bytes (longest zero run as `::`; IPv4-mapped as ::ffff:a.b.c.d). */
function formatIpv6(b: Buffer): string {
  if (b.subarray(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff)
    return `::ffff:${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
  const g = Array.from({ length: 8 }, (_, i) => b.readUInt16BE(i * 2));
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const hex = (xs: number[]) => xs.map((x) => x.toString(16)).join(":");
  if (best < 0) return hex(g);
  return `${hex(g.slice(0, best))}::${hex(g.slice(best + bestLen))}`;
}
