// The TCP ports this machine listens on at loopback (or every address), from /proc/net/tcp
// and tcp6: the command's namespace has a loopback of its own, and the helper answers on
// these addresses and ports there, relaying to this machine's, so the laptop's own services (a local
// database, a mock) stay reachable at 127.0.0.1 as they were.
import { readFileSync } from "node:fs";

const LISTEN = "0A";

/** A loopback listener: the address the namespace answers on, and the port. */
export interface LoopbackListener {
  host: string;
  port: number;
}

function ipv4(hexLe: string): string {
  return [6, 4, 2, 0].map((i) => parseInt(hexLe.slice(i, i + 2), 16)).join(".");
}

/**
 * Listeners in one /proc/net/tcp{,6} table bound to a loopback or the wildcard address
 * (a wildcard one is answered at 127.0.0.1 and ::1).
 */
export function loopbackListeners(table: string): LoopbackListener[] {
  const out = new Map<string, LoopbackListener>();
  const add = (host: string, port: number) => out.set(`${host} ${port}`, { host, port });
  for (const line of table.split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4 || f[3] !== LISTEN) continue;
    const [addr, portHex] = (f[1] ?? "").split(":");
    if (!addr || !portHex) continue;
    const loopback4 = addr.length === 8 && (addr.endsWith("7F") || /^0+$/.test(addr));
    const loopback6 =
      addr.length === 32 && (/^0+$/.test(addr) || addr === "00000000000000000000000001000000");
    // An IPv4-mapped wildcard/loopback on a tcp6 socket (::ffff:127.0.0.1).
    const mapped = addr.length === 32 && addr.startsWith("0000000000000000FFFF0000") && addr.endsWith("7F");
    const port = parseInt(portHex, 16);
    const wildcard = /^0+$/.test(addr);
    if (wildcard) {
      add("127.0.0.1", port);
      add("::1", port);
    } else if (loopback4) add(ipv4(addr), port);
    else if (loopback6) add("::1", port);
    else if (mapped) add(ipv4(addr.slice(24)), port);
  }
  return [...out.values()].sort((a, b) => a.port - b.port || a.host.localeCompare(b.host));
}

/** This machine's loopback listeners (empty where /proc/net is not there). */
export function hostLoopbackListeners(procNet = "/proc/net"): LoopbackListener[] {
  const out = new Map<string, LoopbackListener>();
  for (const t of ["tcp", "tcp6"]) {
    try {
      for (const l of loopbackListeners(readFileSync(`${procNet}/${t}`, "utf8")))
        out.set(`${l.host} ${l.port}`, l);
    } catch {
      /* no such table */
    }
  }
  return [...out.values()];
}
