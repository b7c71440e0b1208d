// Free loopback ports for components that cannot bind port 0 and report it back.
import { randomInt } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";

// Ports come from below the kernel's ephemeral range: a port handed out here is bound by its
// caller only later (after a process starts), and a port of the ephemeral range could be taken
// meanwhile as the source port of any outgoing connection on the host. They stay below the
// NodePort range too (30000–32767), which the test nodes' kube-proxy answers on loopback.
const LOWEST = 10_000;
const NODE_PORTS_START = 30_000;
// Test files run side by side in up to this many workers (vitest.config.ts); each worker takes
// ports from its own slice of the range, so a port one file reserved and released is never
// handed to another file before its process binds it.
const SLICES = 4;

function ephemeralRangeStart(): number {
  try {
    const first = Number(
      readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0],
    );
    return Number.isInteger(first) && first > LOWEST + 1000 ? first : 32768;
  } catch {
    return 32768;
  }
}

/**
 * The part of the range this process takes ports from: its vitest worker's slice
 * (`VITEST_POOL_ID`, inherited by every process a test starts), or the whole range outside vitest.
 */
export function portRange(
  env: NodeJS.ProcessEnv = process.env,
  below = Math.min(ephemeralRangeStart(), NODE_PORTS_START),
): { from: number; to: number } {
  const pool = Number(env.VITEST_POOL_ID);
  if (!Number.isInteger(pool) || pool < 1) return { from: LOWEST, to: below };
  const size = Math.floor((below - LOWEST) / SLICES);
  const from = LOWEST + ((pool - 1) % SLICES) * size;
  return { from, to: from + size };
}

/** Reserves `count` distinct free ports on 127.0.0.1 and releases them for the caller to bind. */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  const { from, to } = portRange();
  try {
    while (servers.length < count) {
      const srv = createServer();
      const port = from + randomInt(to - from);
      const bound = await new Promise<boolean>((resolve) => {
        srv.once("error", () => resolve(false));
        srv.listen(port, "127.0.0.1", () => resolve(true));
      });
      if (bound) servers.push(srv);
    }
    return servers.map((s) => {
      const addr = s.address();
      if (addr === null || typeof addr === "string") throw new Error("unexpected listener address");
      return addr.port;
    });
  } finally {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  }
}

/** True when something accepts TCP connections on 127.0.0.1:port. */
export function isPortListening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(true));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(false)));
  });
}
