// The helper inside the command's namespaces: started by `switchyard exec` as
// `unshare --user --map-root-user --net --mount --pid --fork --kill-child --mount-proc`
// running this file, so it is root of a user namespace of its own and init of a PID
// namespace (whatever it leaves running ends with it). It asks the CLI for its base over the
// bridge (SWITCHYARD_NS_BRIDGE) and builds the network — loopback, the scratch tmpfs, the
// SOCKS5 server, tun2socks — while the CLI waits for the session; then reads the rest of
// its setup and lays out the target's files and resolv.conf, the resolver, the laptop's
// loopback ports and the incoming sockets, says whether it is ready, runs the command as the
// CLI's own user (a nested user namespace) and exits with its exit code. A cancel (the
// session did not open) ends it before the command ever ran.
import { spawn, spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { constants as osConstants } from "node:os";
import { findExecutable } from "../local/executables.js";
import { LocalProxy } from "../local/local-proxy.js";
import { splice } from "../local/splice.js";
import {
  incomingSocket,
  readLine,
  scratchDir,
  socksSocket,
  writeLine,
  type NamespaceBase,
  type NamespaceSetup,
  type SetupLine,
} from "./bridge-protocol.js";
import { layFiles } from "./file-layers.js";
import { bridgeRequest, bridgeTcp, bridgeUdpRelay } from "./helper-bridge.js";
import { NamespaceDns } from "./namespace-dns.js";
import { loopbackUp, startNetwork } from "./namespace-net.js";

const say = (line: string) => process.stderr.write(`switchyard: ${line}\n`);

function relay(from: Socket, to: () => Promise<Socket>): void {
  from.pause();
  from.on("error", () => from.destroy());
  to().then(
    (peer) => {
      splice(from, peer);
      from.resume();
    },
    () => from.destroy(),
  );
}

/** A server at host:port or a Unix path; undefined when that cannot be listened on. */
function listen(
  at: { host: string; port: number } | { path: string },
  onConn: (s: Socket) => void,
): Promise<Server | undefined> {
  const server = createServer(onConn);
  return new Promise((resolve) => {
    server.once("error", () => resolve(undefined));
    server.listen(at, () => resolve(server));
  });
}

/** `unshare --map-user` (util-linux ≥ 2.38) runs the command as the CLI's user; older ones cannot. */
function mapUserSupported(): boolean {
  const r = spawnSync("unshare", ["--help"], { encoding: "utf8" });
  return (r.stdout ?? "").includes("--map-user");
}

/** Before the session is open: loopback, the scratch tmpfs, the UDP SOCKS5 server and tun2socks. */
async function buildNetwork(
  base: NamespaceBase,
  bridge: string,
  closers: Array<() => void>,
): Promise<number> {
  loopbackUp();
  const scratch = scratchDir(base.dir);
  const m = spawnSync("mount", ["-t", "tmpfs", "-o", "mode=0700", "switchyard", scratch], {
    encoding: "utf8",
  });
  if (m.status !== 0)
    throw new Error(`mount tmpfs on ${scratch}: ${(m.stderr || m.error?.message || "").trim()}`);
  const proxy = new LocalProxy({
    dialer: { dial: (host, port) => bridgeTcp(bridge, host, port) },
    udp: bridgeUdpRelay(bridge),
    host: "127.0.0.1",
  });
  const socksPort = await proxy.listen();
  closers.push(() => void proxy.close());
  const net = await startNetwork(base.tun2socks, socksSocket(base.dir), socksPort);
  closers.push(() => net.stop());
  if (net.mode === "single" && !base.quiet)
    say("no routing rules by protocol on this kernel: TCP goes through the namespace helper too (slower)");
  return socksPort;
}

/** Once the session is open: the target's files and resolv.conf, the resolver, the laptop's ports, the incoming sockets. */
async function buildSetup(
  base: NamespaceBase,
  setup: NamespaceSetup,
  bridge: string,
  socksPort: number,
  closers: Array<() => void>,
): Promise<void> {
  const files = [
    ...setup.files,
    ...(setup.resolvConf
      ? [{ path: "/etc/resolv.conf", mode: 0o644, data: Buffer.from(setup.resolvConf).toString("base64") }]
      : []),
  ];
  const laid = layFiles(files, scratchDir(base.dir));
  for (const s of laid.skipped) say(`cannot show ${s.path} to the command: ${s.reason}`);

  if (setup.nameservers.length) {
    const dialTcp = (host: string, port: number) => bridgeTcp(bridge, host, port);
    const dns = new NamespaceDns({ nameservers: setup.nameservers, udp: bridgeUdpRelay(bridge), dialTcp });
    await dns.listen();
    closers.push(() => dns.close());
  }
  const skip = new Set([...setup.deliverPorts, 53, socksPort]);
  for (const { host, port } of setup.hostListeners) {
    if (skip.has(port)) continue;
    const server = await listen({ port, host }, (s) => relay(s, () => bridgeTcp(bridge, host, port, true)));
    if (server) closers.push(() => server.close());
  }
  for (const p of setup.deliverPorts) {
    const path = incomingSocket(base.dir, p);
    rmSync(path, { force: true });
    const server = await listen({ path }, (s) =>
      relay(
        s,
        () =>
          new Promise<Socket>((resolve, reject) => {
            const local = connect({ host: "127.0.0.1", port: p });
            local.once("connect", () => resolve(local));
            local.once("error", reject);
          }),
      ),
    );
    if (!server) throw new Error(`cannot listen on ${path}`);
    closers.push(() => server.close());
  }
}

async function main(): Promise<number> {
  const bridge = process.env.SWITCHYARD_NS_BRIDGE;
  if (!bridge) {
    say("the namespace helper runs only under switchyard exec");
    return 2;
  }
  // The command gets its signals from its process group; the helper waits for it.
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"] as const) process.on(sig, () => {});
  const { socket: control, answer } = await bridgeRequest(bridge, { op: "setup" });
  if (!answer.ok) throw new Error(answer.error);
  const { base } = answer as unknown as { base: NamespaceBase };
  // The CLI may go away at any moment: its end of the line closing is an answer, not a crash.
  control.on("error", () => control.destroy());
  const closers: Array<() => void> = [];
  const end = () => {
    for (const c of closers.reverse()) c();
  };
  let setup: NamespaceSetup;
  let nested: boolean;
  try {
    // The network is built while the CLI still waits for the session; then the rest of the setup.
    const socksPort = await buildNetwork(base, bridge, closers);
    nested = mapUserSupported();
    const line = await readLine<SetupLine>(control);
    if ("cancel" in line) {
      control.destroy();
      end();
      return 0;
    }
    setup = line.setup;
    await buildSetup(base, setup, bridge, socksPort, closers);
  } catch (err) {
    if (!control.destroyed) {
      writeLine(control, { ready: false, error: (err as Error).message });
      control.end();
    }
    end();
    return 3;
  }
  const [cmd, ...args] = setup.command as [string, ...string[]];
  if (!findExecutable(cmd, setup.env)) {
    writeLine(control, { ready: true });
    say(`cannot run ${cmd}: no such file or directory on PATH`);
    return 127;
  }
  if (!nested) say("util-linux before 2.38: the command runs as root of its user namespace");
  writeLine(control, { ready: true });
  const child = spawn(
    nested ? "unshare" : cmd,
    nested ? ["--user", `--map-user=${base.uid}`, `--map-group=${base.gid}`, "--", cmd, ...args] : args,
    { stdio: "inherit", env: setup.env, cwd: setup.cwd },
  );
  const code = await new Promise<number>((resolve) => {
    child.once("error", (err) => {
      say(`cannot run ${cmd}: ${err.message}`);
      resolve(127);
    });
    child.once("exit", (c, signal) =>
      resolve(c ?? 128 + ((signal ? (osConstants.signals as Record<string, number>)[signal] : 1) ?? 1)),
    );
  });
  end();
  control.destroy();
  return code;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    say(`transparent network: ${(err as Error).message}`);
    process.exit(3);
  },
);
