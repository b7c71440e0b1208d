// `switchyard exec … -- CMD`: runs CMD as if it were the target.
// 1. opens the session (progress on stderr; its database branches first, its queue splits
//    until each is Splitting), forwards a local port to each branch through the Default
//    cluster, and reads the Default cluster's environment with each branch variable pointed
//    at its local port (on the transparent network: at the branch's own host, which CMD
//    reaches itself) and each split queue's variable at the session's output queue;
// 2. subscribes the requested ports (mirror or steal, optional HTTP filter) and delivers
//    that traffic to CMD's local ports;
// 3. starts the local SOCKS5/HTTP proxy whose connections leave from the Default cluster;
// 4. runs CMD with that environment and the proxy variables.
// CMD's exit code becomes the CLI's and the session is deleted on exit. If the session is
// lost for good (reconnects exhausted, or it was deleted), CMD is stopped and the CLI
// exits non-zero saying why: a process is never left running silently disconnected — nor
// after the CLI itself is gone (local-command.ts: CMD's process group, a watchdog, and a
// parent-death signal on Linux).
import { constants as osConstants } from "node:os";
import type { KubeConfig } from "@kubernetes/client-node";
import { CliError, CliErrorCode } from "../sdk/cli-errors.js";
import { describeFilter } from "../sdk/session/http-filter.js";
import { describeSplitFilter } from "../sdk/kube/session-queues.js";
import { BranchForwards, directBranchRewrites } from "../sdk/local/branch-forward.js";
import type { Session } from "../sdk/kube/open-session.js";
import type { SessionConfig } from "../sdk/local/session-config.js";
import type { SessionClientOptions } from "../sdk/session/session-client.js";
import { TrafficDelivery } from "../sdk/local/traffic-delivery.js";
import { openCommandSession } from "./command-session.js";
import {
  startNetworkEarly,
  startWithNetwork,
  transparentNetworkFor,
  type EarlyNetwork,
  type ExecNetwork,
} from "./exec-network.js";
import { collectTargetFiles } from "../sdk/transparent/target-files.js";
import type { LocalCommand } from "./local-command.js";

export { childEnvironment, LOCAL_ONLY_ENV } from "./exec-network.js";
import type { Out } from "./output.js";

/** Exit code when the session was lost while CMD ran. */
export const EXIT_SESSION_LOST = 75;

export interface ExecOptions {
  command: string[];
  quiet?: boolean;
  readyTimeoutMs?: number;
  client?: Partial<Omit<SessionClientOptions, "sessionId" | "secret" | "urls" | "caPem">>;
  /** Local environment to start from (default process.env). */
  baseEnv?: NodeJS.ProcessEnv;
}

function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  const n = signal ? (osConstants.signals as Record<string, number>)[signal] : undefined;
  return 128 + (n ?? 1);
}

export async function execCommand(
  kc: KubeConfig,
  cfg: SessionConfig,
  o: ExecOptions,
  out: Out,
): Promise<number> {
  if (o.command.length === 0)
    throw new CliError(
      CliErrorCode.INVALID_OPTION,
      "exec needs a command after --, e.g. switchyard exec -t deployment/app -- npm start",
    );
  const log = (t: string) => {
    if (!o.quiet) out.stderr(`switchyard: ${t}\n`);
  };
  const warn = (t: string) => out.stderr(`switchyard: ${t}\n`);
  const onError = (what: string, err: Error) => warn(`outgoing ${what} failed: ${err.message}`);
  const tun2socks = transparentNetworkFor(cfg, warn);
  const opening = openCommandSession(kc, cfg, out, {
    ...(o.quiet !== undefined ? { quiet: o.quiet } : {}),
    ...(o.readyTimeoutMs !== undefined ? { readyTimeoutMs: o.readyTimeoutMs } : {}),
    ...(o.client ? { client: o.client } : {}),
  });
  // The transparent network is built while the session is created and reconciled (it needs
  // the session only for CMD); a network that cannot even start is known once the session is.
  const starting = tun2socks
    ? startNetworkEarly(tun2socks, cfg, o.command[0]!, o.quiet ?? false, warn, onError).then(
        (network) => ({ network }),
        (error: unknown) => ({ error: error as Error }),
      )
    : undefined;
  let session: Session;
  try {
    session = await opening;
  } catch (err) {
    const s = await starting;
    if (s && "network" in s) await s.network.abandon("the session did not open");
    throw err;
  }
  const started = await starting;
  let early: EarlyNetwork | undefined;
  if (started && "network" in started) early = started.network;
  else if (started) {
    if (cfg.network === "transparent") {
      await session.close("exec could not start").catch(() => {});
      throw new CliError(
        CliErrorCode.INVALID_OPTION,
        `--network=transparent failed: ${started.error.message}`,
      );
    }
    warn(`transparent network failed: ${started.error.message}; using --network=proxy`);
  }
  const local: LocalParts = { ...(early ? { early } : {}), onError };
  try {
    return await runWithSession(session, cfg, o, log, warn, local);
  } finally {
    local.delivery?.stop();
    await local.net?.close();
    await early?.abandon("exec finished");
    await local.forwards?.close();
    await session.close("exec finished").then(
      () => log(`session ${session.id} deleted`),
      (err: unknown) => warn((err as Error).message),
    );
  }
}

/** What exec runs locally around the session, closed when it ends. */
interface LocalParts {
  early?: EarlyNetwork;
  onError: (what: string, err: Error) => void;
  net?: ExecNetwork;
  delivery?: TrafficDelivery;
  forwards?: BranchForwards;
}

async function runWithSession(
  session: Session,
  cfg: SessionConfig,
  o: ExecOptions,
  log: (t: string) => void,
  warn: (t: string) => void,
  local: LocalParts,
): Promise<number> {
  const client = session.client;
  // Say when a cluster comes or goes, not every retry of an upstream that stays down.
  const lastUp = new Map<string, boolean>();
  client.on("upstream", (u) => {
    if (lastUp.get(u.cluster) === u.up && !u.connectionsClosed) return;
    lastUp.set(u.cluster, u.up);
    if (u.up) log(`cluster ${u.cluster}${u.isDefault ? " (default)" : ""} is connected`);
    else
      warn(
        `cluster ${u.cluster}${u.isDefault ? " (default)" : ""} is unreachable: ${u.error || "connection lost"}` +
          `${u.connectionsClosed ? ` (${u.connectionsClosed} connections closed)` : ""}; its traffic stops until it returns`,
      );
  });
  client.on("reconnecting", (r) =>
    warn(
      `router connection lost (${r.error}); reconnecting in ${Math.round(r.delayMs / 1000)} s (attempt ${r.attempt})`,
    ),
  );
  client.on("reconnected", (r) => {
    log(`reconnected through ${r.url}; ${r.resubscribed} subscription(s) restored`);
    for (const f of r.refused) warn(`could not restore ${f}`);
  });
  client.on("log", (l) => log(`agent ${l.level}: ${l.message}`));
  client.on("remoteError", (e) => warn(`remote error: ${e.message}`));

  let forwards: BranchForwards | undefined;
  const direct = local.early ? directBranchRewrites(session.branches) : [];
  for (const b of local.early ? session.branches : [])
    log(
      `${b.envVar} → database ${b.credentials.database} of branch ${b.name} at ${b.credentials.host}:${b.credentials.port} (CMD reaches it on the transparent network)`,
    );
  if (session.branches.length > 0 && !local.early) {
    forwards = local.forwards = new BranchForwards(session.branches, {
      dialer: { dial: (host, port) => client.connectTcp(host, port) },
      onError: (name, err) => warn(`database branch ${name}: connection failed: ${err.message}`),
    });
    await forwards.listen();
    for (const f of forwards.forwards())
      log(
        `${f.envVar} → database ${f.database} of branch ${f.name} at ${f.local} (forwarded through the default cluster to ${f.remote})`,
      );
  }
  for (const q of session.queues) {
    const split = cfg.queues.find((s) => s.queueId === q.queueId);
    const filter = split ? describeSplitFilter(split) : "its filter matches";
    log(`${q.envVar} → ${q.localValue} (queue ${q.queueId}, ${q.mode}: messages where ${filter})`);
  }
  // The environment and the target's files are read side by side (both from the Default cluster's agent).
  const target = local.early ? collectTargetFiles(client, { extraPaths: cfg.files }) : undefined;
  target?.catch(() => {}); // awaited below; an env failure must not leave it unhandled
  const remoteEnv = await client.env({
    include: cfg.envInclude,
    exclude: cfg.envExclude,
    ...(forwards ? { branches: forwards.rewrites() } : direct.length ? { branches: direct } : {}),
    ...(session.queues.length ? { queues: session.queueRewrites() } : {}),
  });
  log(`read ${Object.keys(remoteEnv).length} environment variables from the default cluster`);

  const net = await startWithNetwork({
    client,
    cfg,
    command: o.command,
    baseEnv: o.baseEnv ?? process.env,
    remoteEnv,
    ...(local.early && target ? { early: { network: local.early, target } } : {}),
    log,
    warn,
    onError: local.onError,
  });
  local.net = net;
  const delivery = new TrafficDelivery(client, {
    ports: new Map(cfg.ports.map((p) => [p.remote, p.local])),
    onError: (what, err) => warn(`could not deliver ${what}: ${err.message}`),
    ...(net.socketPathFor ? { http: { socketPathFor: net.socketPathFor } } : {}),
  });
  local.delivery = delivery;
  delivery.start();
  // CMD runs from here on: Ctrl-C and a lost session reach it even while the ports subscribe.
  const supervised = superviseChild(net.command, client, o.command[0]!, warn);
  try {
    for (const p of cfg.ports) {
      await client.subscribe(p.remote, cfg.mode, cfg.mode === "steal" ? cfg.httpFilter : undefined);
      log(
        `${cfg.mode === "steal" ? "stealing" : "mirroring"} port ${p.remote} → local ${p.local}` +
          `${cfg.mode === "steal" && cfg.httpFilter ? ` (requests where ${describeFilter(cfg.httpFilter)})` : ""}`,
      );
    }
  } catch (err) {
    net.command.takeDown();
    await supervised;
    throw err;
  }
  return await supervised;
}

/** Waits for CMD; forwards SIGINT/SIGTERM to its group; stops it when the session is lost. */
function superviseChild(
  command: LocalCommand,
  client: Session["client"],
  cmd: string,
  warn: (t: string) => void,
): Promise<number> {
  const child = command.child;
  return new Promise<number>((resolve) => {
    let lost: CliError | undefined;
    const forward = (sig: NodeJS.Signals) => () => {
      if (child.exitCode === null && child.signalCode === null) command.signal(sig);
    };
    const onInt = forward("SIGINT");
    const onTerm = forward("SIGTERM");
    process.on("SIGINT", onInt);
    process.on("SIGTERM", onTerm);
    const onLost = (err: CliError) => {
      lost = err;
      warn(`${err.message}`);
      warn(`stopping ${cmd}: it must not keep running without its session`);
      command.takeDown();
    };
    client.on("lost", onLost);
    const done = (code: number) => {
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
      client.off("lost", onLost);
      void command.finish().then(() => resolve(code));
    };
    child.once("error", (err) => {
      warn(`cannot run ${cmd}: ${err.message}`);
      done(127);
    });
    const exited = (code: number | null, signal: NodeJS.Signals | null) => {
      if (lost) {
        warn(`${cmd} stopped because session ${client.sessionId} was lost [${lost.code}]`);
        return done(EXIT_SESSION_LOST);
      }
      done(exitCodeOf(code, signal));
    };
    // CMD may have ended while the ports were being subscribed.
    if (child.exitCode !== null || child.signalCode !== null) exited(child.exitCode, child.signalCode);
    else child.once("exit", exited);
  });
}
