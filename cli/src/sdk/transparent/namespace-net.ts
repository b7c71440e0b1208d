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

/** `ip` for IPv6; false where IPv6 is off on this machine. */
function ip6(args: string[]): boolean {
  try {
    ip(["-6", ...args]);
    return true;
  } catch {
    return false;
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

/** Starts tun2socks on a new TUN device in front of `proxy`; the device is up, not yet routed. */
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
      // netstack's window (0.65x of the proxy's throughput; 0.9x with these, bench/README.md).
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
    if (spawnSync("ip", ["link", "show", "dev", device.name], { stdio: "ignore" }).status === 0) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`tun2socks made no ${device.name} device within ${timeoutMs} ms: ${output.trim()}`);
    }
    await sleep(10);
  }
  ip(["addr", "add", device.v4, "dev", device.name]);
  ip(["link", "set", device.name, "up"]);
  ip6(["addr", "add", device.v6, "dev", device.name]);
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
 * UDP to the helper's SOCKS5 at 127.0.0.1:`udpSocksPort`.
 */
export async function startNetwork(
  binary: string,
  tcpSocksPath: string,
  udpSocksPort: number,
): Promise<NamespaceNetwork> {
  const children: ChildProcess[] = [];
  try {
    children.push(await startTun2socks(binary, UDP_DEVICE, `socks5://127.0.0.1:${udpSocksPort}`));
    let split = true;
    try {
      ip(["rule", "add", "ipproto", "udp", "lookup", UDP_TABLE, "pref", "100"]);
      ip(["route", "add", "default", "dev", UDP_DEVICE.name, "table", UDP_TABLE]);
      if (ip6(["rule", "add", "ipproto", "udp", "lookup", UDP_TABLE, "pref", "100"]))
        ip6(["route", "add", "default", "dev", UDP_DEVICE.name, "table", UDP_TABLE]);
    } catch {
      split = false; // no rules by protocol: everything through sy1 and the helper
    }
    if (split) {
      children.push(await startTun2socks(binary, TCP_DEVICE, `socks5://${tcpSocksPath}`));
      ip(["route", "add", "default", "dev", TCP_DEVICE.name]);
      ip6(["route", "add", "default", "dev", TCP_DEVICE.name]);
    } else {
      ip(["route", "add", "default", "dev", UDP_DEVICE.name]);
      ip6(["route", "add", "default", "dev", UDP_DEVICE.name]);
    }
    return { mode: split ? "split" : "single", stop: () => stopAll(children) };
  } catch (err) {
    stopAll(children);
    throw err;
  }
}
