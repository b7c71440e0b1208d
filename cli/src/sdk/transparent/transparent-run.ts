// The CLI's side of one transparent run, in two steps so that the namespace is built while
// the session is still starting:
// - `start` (before the session exists): a private directory, the bridge the helper connects
//   to, and the command line that starts the helper in new user, network, mount and PID
//   namespaces (`unshare`, no privilege). The caller starts that command line at once as it
//   starts any command (its process group, watchdog and parent-death signal); the helper
//   builds the network meanwhile.
// - `configure` (once the session is open): the target's files and the pod's resolv.conf
//   (read through the Default cluster by `collectTargetFiles`), the command, its environment
//   and ports, and the session as the namespace's way out; or `cancel` when it did not open.
// Then the caller waits for `ready()`: until the helper says ready the command has not run,
// so a namespace that cannot be built falls back to the proxy with nothing lost.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { BlockList, connect, createServer, isIP, type Server } from "node:net";
import { tmpdir } from "node:os";
import { extname, join } from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { CliError, CliErrorCode } from "../cli-errors.js";
import { LocalProxy } from "../local/local-proxy.js";
import { splice } from "../local/splice.js";
import { incomingSocket, scratchDir, socksSocket, type NamespaceSetup } from "./bridge-protocol.js";
import { hostLoopbackListeners } from "./host-listeners.js";
import { NamespaceBridge, type HelperReady, type SessionOutgoing } from "./namespace-bridge.js";
import { namespaceResolvConf, parseResolvConf } from "./resolv-conf.js";
import type { TargetFiles } from "./target-files.js";

export interface TransparentStartOptions {
  tun2socks: string;
  /** Addresses or CIDRs that stay on this machine (loopback always does). */
  keepLocal?: readonly string[];
  quiet?: boolean;
  onError?: (what: string, err: Error) => void;
}

export interface TransparentSetupOptions {
  command: string[];
  /** The command's environment. */
  env: NodeJS.ProcessEnv;
  /** The target's files and resolv.conf (collectTargetFiles). */
  target: TargetFiles;
  /** Local ports the CLI delivers incoming traffic to (the command listens on them). */
  deliverPorts: number[];
  /** The session: the namespace's TCP and UDP leave through it. */
  outgoing: SessionOutgoing;
}

/** What the namespace shows: mounts laid out, files read, and those that could not be. */
export interface TransparentSummary {
  mounts: string[];
  files: number;
  skipped: Array<{ path: string; reason: string }>;
}

/** A BlockList of addresses and CIDRs; a clear error names the bad entry. */
export function keepLocalList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const e of entries) {
    const [addr, bits] = e.split("/");
    const family = isIP(addr ?? "");
    const prefix = bits === undefined ? (family === 6 ? 128 : 32) : Number(bits);
    if (!family || !Number.isInteger(prefix) || prefix < 0 || prefix > (family === 6 ? 128 : 32))
      throw new CliError(
        CliErrorCode.INVALID_OPTION,
        `--keep-local ${JSON.stringify(e)} is not an address or CIDR (e.g. 192.168.1.0/24 or 10.0.0.5)`,
      );
    list.addSubnet(addr!, prefix, family === 6 ? "ipv6" : "ipv4");
  }
  return list;
}

/** How a run's private directory in the temporary directory is named: this, then random characters. */
export const RUN_PREFIX = "switchyard-ns-";

function readTextOr(path: string, fallback = ""): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return fallback;
  }
}

/**
 * Removes the directories of earlier runs that nothing cleaned up: a killed CLI's watchdog
 * removes its run's directory (local-command.ts), so this is for a watchdog killed too (a
 * whole session SIGKILLed, a machine that went down): this user's, older than a minute, whose
 * bridge no longer answers.
 */
export async function sweepStaleRuns(dir = tmpdir()): Promise<string[]> {
  const removed: string[] = [];
  for (const name of readdirSync(dir).filter((n) => n.startsWith(RUN_PREFIX))) {
    const path = join(dir, name);
    try {
      const st = statSync(path);
      if (st.uid !== process.getuid?.() || Date.now() - st.mtimeMs < 60_000) continue;
      const alive = await new Promise<boolean>((resolve) => {
        const c = connect({ path: join(path, "bridge.sock") });
        c.once("connect", () => {
          c.destroy();
          resolve(true);
        });
        c.once("error", () => resolve(false));
      });
      if (alive) continue;
      rmSync(path, { recursive: true, force: true });
      removed.push(path);
    } catch {
      /* gone meanwhile, or not ours to read */
    }
  }
  return removed;
}

export class TransparentRun {
  readonly #published: Server[] = [];
  #laptopPorts: readonly number[] = [];
  #summary: TransparentSummary = { mounts: [], files: 0, skipped: [] };

  private constructor(
    readonly dir: string,
    readonly bridge: NamespaceBridge,
    private readonly socks: LocalProxy,
  ) {}

  /** What the namespace shows (once configured). */
  get summary(): TransparentSummary {
    return this.#summary;
  }

  /** Delivered ports served on this machine: their traffic goes there, not into the namespace. */
  get laptopPorts(): readonly number[] {
    return this.#laptopPorts;
  }

  /** Before the session: the directory, the bridge with the helper's base, the SOCKS5 server for tun2socks. */
  static async start(o: TransparentStartOptions): Promise<TransparentRun> {
    const keep = keepLocalList(o.keepLocal ?? []);
    await sweepStaleRuns();
    const dir = mkdtempSync(join(tmpdir(), RUN_PREFIX));
    try {
      mkdirSync(scratchDir(dir), { mode: 0o700 });
      const bridge = new NamespaceBridge({
        path: join(dir, "bridge.sock"),
        base: {
          uid: process.getuid?.() ?? 0,
          gid: process.getgid?.() ?? 0,
          tun2socks: o.tun2socks,
          dir,
          quiet: o.quiet ?? false,
        },
        keepLocal: (a) => keep.check(a, isIP(a) === 6 ? "ipv6" : "ipv4"),
        ...(o.onError ? { onError: o.onError } : {}),
      });
      await bridge.listen();
      // The namespace's TCP goes straight from tun2socks to this SOCKS5 server (no helper hop).
      const socks = new LocalProxy({
        dialer: { dial: (host, port) => bridge.connect(host, port) },
        path: socksSocket(dir),
      });
      await socks.listen();
      return new TransparentRun(dir, bridge, socks);
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** The session is open: the helper gets the rest of its setup and builds the namespace's files, DNS and ports. */
  configure(o: TransparentSetupOptions): void {
    // An agent that cannot tell the pod's (an older one): the laptop's own nameservers, asked
    // from this machine when they are on loopback (a local stub resolver), as before.
    const pod = parseResolvConf(o.target.resolvConf || readTextOr("/etc/resolv.conf"));
    // A delivered port already served on this machine (the app run in a debugger, say) keeps
    // getting its traffic there, and CMD reaches it at 127.0.0.1 like any laptop service.
    const hostListeners = hostLoopbackListeners();
    const onLaptop = o.deliverPorts.filter((p) =>
      hostListeners.some((l) => l.port === p && l.host === "127.0.0.1"),
    );
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(o.env)) if (v !== undefined) env[k] = v;
    const setup: NamespaceSetup = {
      command: o.command,
      env,
      cwd: process.cwd(),
      resolvConf: pod.nameservers.length ? namespaceResolvConf(pod) : "",
      nameservers: pod.nameservers,
      files: o.target.files,
      hostListeners,
      deliverPorts: o.deliverPorts.filter((p) => !onLaptop.includes(p)),
    };
    this.#laptopPorts = onLaptop;
    this.#summary = { mounts: o.target.mounts, files: o.target.files.length, skipped: o.target.skipped };
    this.bridge.configure(setup, o.outgoing);
  }

  /** The session did not open: the helper ends without running anything. */
  cancel(reason: string): void {
    this.bridge.cancel(reason);
  }

  /** The command line that starts the helper (for startLocalCommand), and its environment. */
  helperCommand(): { cmd: string; args: string[]; env: NodeJS.ProcessEnv } {
    const here = fileURLToPath(import.meta.url);
    const helper = join(here, "..", `namespace-helper${extname(here)}`);
    // From a checkout (TypeScript sources) the helper runs under tsx, as the CLI does.
    const loader =
      extname(here) === ".ts"
        ? ["--import", pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href]
        : [];
    return {
      cmd: "unshare",
      args: [
        "--user",
        "--map-root-user",
        "--net",
        "--mount",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--",
        process.execPath,
        ...loader,
        helper,
      ],
      // The CLI's own environment, not the command's (a remote NODE_OPTIONS must not reach the helper).
      env: { ...process.env, SWITCHYARD_NS_BRIDGE: this.bridge.path },
    };
  }

  /** Where the CLI delivers incoming traffic for a local port: the helper's socket in the namespace. */
  socketPathFor(port: number): string | undefined {
    return this.#laptopPorts.includes(port) ? undefined : incomingSocket(this.dir, port);
  }

  ready(): Promise<HelperReady> {
    return this.bridge.ready();
  }

  /**
   * Makes each delivered port reachable from this machine too, at 127.0.0.1:port as before
   * (a browser on the laptop still opens the app); resolves to the ports that could not be
   * (in use here).
   */
  async publish(ports: readonly number[]): Promise<number[]> {
    const busy: number[] = [];
    for (const port of ports) {
      const path = this.socketPathFor(port);
      if (!path) continue;
      const server = createServer((s) => {
        splice(s, connect({ path }));
      });
      const ok = await new Promise<boolean>((resolve) => {
        server.once("error", () => resolve(false));
        server.listen(port, "127.0.0.1", () => resolve(true));
      });
      if (ok) this.#published.push(server);
      else busy.push(port);
    }
    return busy;
  }

  async close(): Promise<void> {
    for (const s of this.#published) s.close();
    await this.socks.close();
    await this.bridge.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
