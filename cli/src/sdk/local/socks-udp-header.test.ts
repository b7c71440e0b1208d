// The SOCKS5 UDP header codec: round trips for IPv4, IPv6 (compressed, mapped, full) and
// domain names byte for byte against RFC 1928's layout, and malformed headers rejected
// with a reason rather than thrown.
import { describe, expect, it } from "vitest";
import { decodeSocksUdp, encodeSocksAddress, encodeSocksUdp, ipBytes } from "./socks-udp-header.js";

const data = Buffer.from("dns query bytes");

describe("SOCKS5 UDP header", () => {
  it("encodes IPv4 as ATYP 1 and decodes it back", () => {
    const b = encodeSocksUdp("10.1.2.3", 53, data);
    expect([...b.subarray(0, 10)]).toEqual([0, 0, 0, 1, 10, 1, 2, 3, 0, 53]);
    expect(decodeSocksUdp(b)).toEqual({ ok: true, frag: 0, host: "10.1.2.3", port: 53, data });
  });

  it.each([
    ["::1", "::1"],
    ["fe80::1%eth0", "fe80::1"],
    ["[2001:db8::8:800:200c:417a]", "2001:db8::8:800:200c:417a"],
    ["2001:0db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
    ["1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"],
    ["::ffff:127.0.0.1", "::ffff:127.0.0.1"],
    ["::", "::"],
  ])("encodes IPv6 %s as ATYP 4 and decodes it as %s", (host, canonical) => {
    const b = encodeSocksUdp(host, 5353, data);
    expect(b[3]).toBe(4);
    expect(b.length).toBe(4 + 16 + 2 + data.length);
    expect(b.subarray(4, 20).equals(ipBytes(host)!)).toBe(true);
    expect(decodeSocksUdp(b)).toEqual({ ok: true, frag: 0, host: canonical, port: 5353, data });
  });

  it("writes the 16 address bytes of an IPv6 literal in network order", () => {
    expect(ipBytes("2001:db8::1")!.toString("hex")).toBe("20010db8000000000000000000000001");
    expect(ipBytes("::ffff:1.2.3.4")!.toString("hex")).toBe("00000000000000000000ffff01020304");
    expect(ipBytes("db.shop.svc")).toBeUndefined();
  });

  it("encodes a domain name as ATYP 3 with its length, unresolved", () => {
    const b = encodeSocksUdp("dns.kube-system.svc.cluster.local", 53, data, 0);
    expect(b[3]).toBe(3);
    expect(b[4]).toBe(33);
    expect(b.subarray(5, 38).toString()).toBe("dns.kube-system.svc.cluster.local");
    expect(decodeSocksUdp(b)).toMatchObject({
      ok: true,
      host: "dns.kube-system.svc.cluster.local",
      port: 53,
    });
  });

  it("keeps FRAG and an empty payload", () => {
    expect(decodeSocksUdp(encodeSocksUdp("1.2.3.4", 9, Buffer.alloc(0), 3))).toEqual({
      ok: true,
      frag: 3,
      host: "1.2.3.4",
      port: 9,
      data: Buffer.alloc(0),
    });
  });

  it("encodes bare addresses for SOCKS replies", () => {
    expect([...encodeSocksAddress("127.0.0.1", 1080)]).toEqual([1, 127, 0, 0, 1, 4, 56]);
  });

  it("refuses to encode what the header cannot carry", () => {
    expect(() => encodeSocksAddress("a".repeat(256), 53)).toThrow(/domain name must be 1-255 bytes, got 256/);
    expect(() => encodeSocksAddress("", 53)).toThrow(/1-255 bytes, got 0/);
    expect(() => encodeSocksAddress("1.2.3.4", 70000)).toThrow(/port must be an integer 0-65535, got 70000/);
  });

  it.each([
    ["shorter than the header", [0, 0, 0], /shorter than RSV FRAG ATYP/],
    ["truncated IPv4", [0, 0, 0, 1, 10, 0, 0, 1, 0], /truncated IPv4/],
    ["truncated IPv6", [0, 0, 0, 4, ...Array<number>(16).fill(0), 0], /truncated IPv6/],
    ["no domain length", [0, 0, 0, 3], /missing the domain name length/],
    ["empty domain", [0, 0, 0, 3, 0, 0, 53], /empty domain name/],
    ["truncated domain", [0, 0, 0, 3, 5, 0x61, 0x62, 0, 53], /truncated domain/],
    ["control bytes in the name", [0, 0, 0, 3, 2, 0x61, 0x0a, 0, 53], /control bytes/],
    ["unknown ATYP", [0, 0, 0, 2, 1, 2, 3, 4, 0, 53], /ATYP 2 is not 1 \(IPv4\), 3 \(domain\) or 4 \(IPv6\)/],
  ])("rejects %s", (_, bytes, reason) => {
    const d = decodeSocksUdp(Buffer.from(bytes));
    expect(d.ok).toBe(false);
    expect(!d.ok && d.error).toMatch(reason);
  });
});
