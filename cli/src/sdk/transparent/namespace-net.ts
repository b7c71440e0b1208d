// The network of the command's namespace (run by the helper, root of its user namespace):
// loopback up, and TUN devices served by tun2socks as the default routes, IPv4 and IPv6.
// - sy0 carries TCP: its tun2socks speaks SOCKS5 over a Unix socket straight to the CLI
//   (no hop through the helper), which tun2socks supports for TCP only;
// - sy1 carries UDP (a routing rule by protocol, `ip rule … ipproto udp`): its tun2socks
//   speaks SOCKS5 UDP ASSOCIATE to the helper's SOCKS5 server, which relays over the bridge.
// Where the kernel has no rules by protocol (before 4.17), sy1 alone carries everything.
// tun2socks runs in process groups of their own, so the command's Ctrl-C does not cut the
// network under its graceful shutdown; they end with the helper's PID namespace.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

/** The device's MTU as loopback's: bulk transfers cost tun2socks far fewer packets than at 1500. */
export const TUN_MTU = 65520;
const UDP_TABLE = "100";
const TCP_BUFFER = "4MiB";

interface Device {
  name: string;
  v4: string;
  v6: string;
}
const TCP_DEVICE: Device = { name: "sy0", v4: "198.18.0.1/24", v6: "fd73:7977::1/64" };
const UDP_DEVICE: Device = { name: "sy1", v4: "198.18.1.1/24", v6: "fd73:7977:1::1/64" };

export function ip(args: string[]): void {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.error) throw new Error(`ip ${args.join(" ")}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${(r.stderr || `exit ${r.status}`).trim()}`);
}

/** Several `ip` commands in one process (`ip -batch`); throws with the first failure's words. */
export function ipBatch(commands: string[]): void {
  const r = spawnSync("ip", ["-batch", "-"], { input: commands.join("\n") + "\n", encoding: "utf8" });
  if (r.error) throw new Error(`ip -batch: ${r.error.message}`);
  if (r.status !== 0)
    throw new Error(`ip ${commands.join("; ")}: ${(r.stderr || `exit ${r.status}`).trim()}`);
}

/** The same for IPv6, each command tried (`-force`); false where any failed (IPv6 off on this machine). */
function ip6Batch(commands: string[]): boolean {
  const r = spawnSync("ip", ["-force", "-6", "-batch", "-"], { input: commands.join("\n") + "\n" });
  return !r.error && r.status === 0;
}

/** Whether this network namespace has the device (its /proc/net/dev: no process to spawn). */
function hasDevice(name: string): boolean {
  try {
    return new RegExp(`^\\s*${name}:`, "m").test(readFileSync("/proc/net/dev", "utf8"));
  } catch {
    return spawnSync("ip", ["link", "show", "dev", name], { stdio: "ignore" }).status === 0;
  }
}

export function loopbackUp(): void {
  ip(["link", "set", "lo", "up"]);
}

export interface NamespaceNetwork {
  /** split: TCP straight to the CLI, UDP through the helper; single: both through the helper. */
  mode: "split" | "single";
  stop(): void;
}

/** Starts tun2socks on a new TUN device in front of `proxy`; the device exists, without address or route. */
async function startTun2socks(
  binary: string,
  device: Device,
  proxy: string,
  timeoutMs = 10_000,
): Promise<ChildProcess> {
  let output = "";
  const child = spawn(
    binary,
    [
      "-device",
      `tun://${device.name}`,
      "-proxy",
      proxy,
      "-mtu",
      String(TUN_MTU),
      "-tcp-auto-tuning",
      // Buffers as large as the path's: with the defaults a bulk download stalls on the
      // netstack's window (0.65x of the proxy's throughput; 0.9x with these, bench/history.md).
      "-tcp-sndbuf",
      TCP_BUFFER,
      "-tcp-rcvbuf",
      TCP_BUFFER,
      "-loglevel",
      "error",
    ],
    { stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  const keep = (b: Buffer) => {
    output = (output + b.toString("utf8")).slice(-4000);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  let exited: string | undefined;
  child.once("exit", (code, signal) => (exited = `exit ${code ?? signal}`));
  child.once("error", (err) => (exited = err.message));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (exited) throw new Error(`tun2socks ended (${exited}): ${output.trim() || "no output"}`);
    if (hasDevice(device.name)) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`tun2socks made no ${device.name} device within ${timeoutMs} ms: ${output.trim()}`);
    }
    await sleep(5);
  }
  // Its later output (errors only) goes to the helper's stderr.
  child.stdout!.off("data", keep);
  child.stderr!.off("data", keep);
  child.stderr!.on("data", (b: Buffer) =>
    process.stderr.write(`switchyard: tun2socks: ${b.toString("utf8")}`),
  );
  child.stdout!.resume();
  return child;
}

function stopAll(children: ChildProcess[]): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGTERM");
}

/**
 * Builds the namespace's routes: TCP to `tcpSocksPath` (the CLI's SOCKS5 over a Unix socket),
 * UDP to the helper's SOCKS5 at 127.0.0.1:`udpSocksPort`. Both tun2socks start at once.
 */
export async function startNetwork(
  binary: string,
  tcpSocksPath: string,
  udpSocksPort: number,
): Promise<NamespaceNetwork> {
  const started = await Promise.allSettled([
    startTun2socks(binary, UDP_DEVICE, `socks5://127.0.0.1:${udpSocksPort}`),
    startTun2socks(binary, TCP_DEVICE, `socks5://${tcpSocksPath}`),
  ]);
  const children = started.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  try {
    for (const r of started) if (r.status === "rejected") throw r.reason;
    const devices = [UDP_DEVICE, TCP_DEVICE];
    ipBatch(devices.flatMap((d) => [`addr add ${d.v4} dev ${d.name}`, `link set ${d.name} up`]));
    const v6 = ip6Batch(devices.map((d) => `addr add ${d.v6} dev ${d.name}`));
    let split = true;
    try {
      ip(["rule", "add", "ipproto", "udp", "lookup", UDP_TABLE, "pref", "100"]);
    } catch {
      split = false; // no rules by protocol: everything through sy1 and the helper
    }
    if (split) {
      ipBatch([
        `route add default dev ${UDP_DEVICE.name} table ${UDP_TABLE}`,
        `route add default dev ${TCP_DEVICE.name}`,
      ]);
      if (v6)
        ip6Batch([
          `rule add ipproto udp lookup ${UDP_TABLE} pref 100`,
          `route add default dev ${UDP_DEVICE.name} table ${UDP_TABLE}`,
          `route add default dev ${TCP_DEVICE.name}`,
        ]);
      return { mode: "split", stop: () => stopAll(children) };
    }
    stopAll([children[1]!]);
    ip(["route", "add", "default", "dev", UDP_DEVICE.name]);
    if (v6) ip6Batch([`route add default dev ${UDP_DEVICE.name}`]);
    return { mode: "single", stop: () => stopAll(children) };
  } catch (err) {
    stopAll(children);
    throw err;
  }
}
