// The local end of a database branch (DESIGN §7): per branch, a TCP listener on loopback
// (a free port) whose every connection is dialled through the session's outgoing TCP — the
// Default cluster's agent connects to the branch server's host:port from the branch's
// Secret — and spliced byte for byte. The local app then reaches its branch with a stock
// driver at 127.0.0.1:<port>: the env rewrite the Default agent is asked for (`rewrites`)
// carries that address and the branch's database, user and password. Listeners live in
// the CLI process and close with it; `close()` ends them and every open connection.
// Under `--network=transparent` CMD resolves cluster names and dials them itself (its
// connections leave from the Default cluster): `directBranchRewrites` then points each
// variable at the branch's own host and port, and no listener is opened.
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import type { BranchCredentials } from "../../../../proto/api/v1alpha1/index.js";
import type { EnvBranchRewrite } from "../session/session-requests.js";
import type { Dialer } from "./local-proxy.js";

/** What a forward needs of a Ready branch (the kube side's ReadyBranch). */
export interface ForwardedBranch {
  /** The target's variable pointed at this branch. */
  envVar: string;
  /** Name of the branch CR, for messages. */
  name: string;
  /** Never logged; only host and port are used to dial. */
  credentials: BranchCredentials;
}

export interface BranchForwardOptions {
  dialer: Dialer;
  /** Listen host (default 127.0.0.1: a branch is never exposed to the LAN). */
  host?: string;
  /** Called when a connection cannot be dialled or breaks (no credentials in it). */
  onError?: (branch: string, err: Error) => void;
}

interface Listener {
  branch: ForwardedBranch;
  server: Server;
  port: number;
}

export class BranchForwards {
  readonly #o: BranchForwardOptions;
  readonly #branches: readonly ForwardedBranch[];
  #listeners: Listener[] = [];
  readonly #sockets = new Set<Socket>();
  /** Connections forwarded so far (for tests and status lines). */
  connections = 0;

  constructor(branches: readonly ForwardedBranch[], options: BranchForwardOptions) {
    this.#branches = branches;
    this.#o = options;
  }

  /** Opens one listener per branch. */
  async listen(): Promise<void> {
    const host = this.#o.host ?? "127.0.0.1";
    for (const branch of this.#branches) {
      const server = createServer((s) => void this.#accept(branch, s));
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(0, host, () => resolve());
      });
      this.#listeners.push({ branch, server, port: (server.address() as AddressInfo).port });
    }
  }

  /** Each branch's local address and where its connections go (no credentials). */
  forwards(): Array<{ envVar: string; name: string; local: string; remote: string; database: string }> {
    return this.#listeners.map((l) => ({
      envVar: l.branch.envVar,
      name: l.branch.name,
      local: `${this.#o.host ?? "127.0.0.1"}:${l.port}`,
      remote: `${l.branch.credentials.host}:${l.branch.credentials.port}`,
      database: l.branch.credentials.database,
    }));
  }

  /** The rewrites to ask the Default agent for: each variable → the branch at the local port. */
  rewrites(): EnvBranchRewrite[] {
    return this.#listeners.map((l) => ({
      variable: l.branch.envVar,
      database: l.branch.credentials.database,
      user: l.branch.credentials.user,
      password: l.branch.credentials.password,
      host: this.#o.host ?? "127.0.0.1",
      port: l.port,
    }));
  }

  async #accept(branch: ForwardedBranch, local: Socket): Promise<void> {
    this.#sockets.add(local);
    local.once("close", () => this.#sockets.delete(local));
    local.on("error", () => local.destroy());
    const port = Number(branch.credentials.port);
    try {
      const remote = await this.#o.dialer.dial(branch.credentials.host, port);
      if (local.destroyed) return void remote.destroy();
      this.connections++;
      remote.on("error", (err: Error) => {
        this.#o.onError?.(branch.name, err);
        local.destroy();
      });
      local.on("error", () => remote.destroy());
      local.on("close", () => remote.destroy());
      remote.on("close", () => local.destroySoon());
      local.pipe(remote);
      remote.pipe(local);
    } catch (err) {
      this.#o.onError?.(branch.name, err as Error);
      local.destroy();
    }
  }

  /** Closes every listener and connection (idempotent). */
  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    const listeners = this.#listeners;
    this.#listeners = [];
    await Promise.all(listeners.map((l) => new Promise<void>((resolve) => l.server.close(() => resolve()))));
  }
}

/**
 * The rewrites for a CMD on the transparent network: each variable → the branch at its own
 * host and port (e.g. a branch pod's Service name), which CMD reaches through the session.
 */
export function directBranchRewrites(branches: readonly ForwardedBranch[]): EnvBranchRewrite[] {
  return branches.map((b) => ({
    variable: b.envVar,
    database: b.credentials.database,
    user: b.credentials.user,
    password: b.credentials.password,
    host: b.credentials.host,
    port: Number(b.credentials.port),
  }));
}
