// How exec's CMD reaches the Default cluster, and CMD started that way:
// - transparent (Linux; the default where the machine allows it): CMD runs in user, network,
//   mount and PID namespaces of its own (../sdk/transparent): every TCP connection and UDP
//   flow, DNS, and the target's files are the cluster's, for any program, with no root;
// - proxy: CMD gets ALL_PROXY/HTTP(S)_PROXY for the local SOCKS5/HTTP proxy;
// - none (--no-proxy): CMD runs as it is.
// With --network=auto a machine that cannot do the transparent network says why in one line
// and uses the proxy; with --network=transparent that is an error. A namespace that cannot be
// built also falls back before CMD ever ran, so nothing is lost.
// The transparent network starts before the session (`startNetworkEarly`): its helper builds
// the namespace's network while the session is created and reconciled, and gets the target's
// files, DNS and CMD once the session is open (`startWithNetwork`).
import { CliError, CliErrorCode } from "../sdk/cli-errors.js";
import { LocalProxy } from "../sdk/local/local-proxy.js";
import { sessionUdpRelay } from "../sdk/local/session-udp-relay.js";
import type { SessionConfig } from "../sdk/local/session-config.js";
import type { SessionClient } from "../sdk/session/session-client.js";
import type { TargetFiles } from "../sdk/transparent/target-files.js";
import { TransparentRun } from "../sdk/transparent/transparent-run.js";
import { checkTransparentSupport } from "../sdk/transparent/transparent-support.js";
import { startLocalCommand, type LocalCommand } from "./local-command.js";

/** Variables that describe the local machine, not the app: kept from the local environment. */
export const LOCAL_ONLY_ENV = new Set([
  "PATH",
  "HOME",
  "HOSTNAME",
  "PWD",
  "OLDPWD",
  "SHLVL",
  "TERM",
  "USER",
  "LOGNAME",
  "SHELL",
  "TMPDIR",
  "DISPLAY",
  "SSH_AUTH_SOCK",
  "_",
]);

/** CMD's environment: local, overlaid with the remote one (except local-only names), plus the proxy. */
export function childEnvironment(
  base: NodeJS.ProcessEnv,
  remote: Record<string, string>,
  proxy: { socks: string; http: string } | undefined,
  sessionId: string,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base };
  for (const [k, v] of Object.entries(remote)) if (!LOCAL_ONLY_ENV.has(k)) env[k] = v;
  if (proxy) {
    for (const k of ["ALL_PROXY", "all_proxy"]) env[k] = proxy.socks;
    for (const k of ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"]) env[k] = proxy.http;
    for (const k of ["NO_PROXY", "no_proxy"]) env[k] = "localhost,127.0.0.1,::1";
  }
  env.SWITCHYARD_SESSION = sessionId;
  return env;
}

export interface ExecNetwork {
  mode: "transparent" | "proxy" | "none";
  command: LocalCommand;
  /** Under the transparent network: where incoming traffic for a local port is delivered. */
  socketPathFor?: (port: number) => string | undefined;
  close(): Promise<void>;
}

/**
 * The transparent network started before the session: its helper runs and builds the
 * namespace's network while the session starts. Owned by whoever holds it until
 * `startWithNetwork` takes it; `abandon` ends it (idempotent, nothing once taken).
 */
export interface EarlyNetwork {
  readonly run: TransparentRun;
  readonly command: LocalCommand;
  /** Resolves if the helper ends (it never does before it said ready, unless something is wrong). */
  readonly ended: Promise<{ ready: false; error: string }>;
  abandon(reason: string): Promise<void>;
  /** Hands it over to whoever runs CMD with it (then `abandon` does nothing); false once abandoned. */
  take(): boolean;
}

/**
 * The tun2socks binary when exec will use the transparent network: undefined for --no-proxy
 * and --network=proxy, and (saying why) where this machine cannot, with --network=auto; an
 * error with --network=transparent there.
 */
export function transparentNetworkFor(cfg: SessionConfig, warn: (t: string) => void): string | undefined {
  if (!cfg.proxy || cfg.network === "proxy") return undefined;
  const support = checkTransparentSupport();
  if (support.ok) return support.tun2socks;
  if (cfg.network === "transparent")
    throw new CliError(
      CliErrorCode.INVALID_OPTION,
      `--network=transparent is not possible here: ${support.reason}`,
    );
  warn(`transparent network unavailable: ${support.reason}; using --network=proxy`);
  return undefined;
}

/** Starts the transparent network's helper, which builds the network while the session starts. */
export async function startNetworkEarly(
  tun2socks: string,
  cfg: SessionConfig,
  cmdName: string,
  quiet: boolean,
  warn: (t: string) => void,
  onError: (what: string, err: Error) => void,
): Promise<EarlyNetwork> {
  const run = await TransparentRun.start({
    tun2socks,
    keepLocal: cfg.keepLocal,
    quiet,
    onError,
  });
  const h = run.helperCommand();
  // A killed CLI leaves the run's directory to the watchdog, which removes it once the helper is gone.
  const command = startLocalCommand(h.cmd, h.args, { env: h.env, warn, name: cmdName, runDir: run.dir });
  const ended = new Promise<{ ready: false; error: string }>((resolve) => {
    command.child.once("exit", (code, signal) =>
      resolve({ ready: false, error: `the namespace helper ended (${code ?? signal}) before it was ready` }),
    );
    command.child.once("error", (err) => resolve({ ready: false, error: err.message }));
  });
  let state: "held" | "taken" | "gone" = "held";
  return {
    run,
    command,
    ended,
    abandon: async (reason) => {
      if (state !== "held") return;
      state = "gone";
      run.cancel(reason);
      command.takeDown();
      await ended;
      await command.finish();
      await run.close();
    },
    take: () => {
      if (state !== "held") return false;
      state = "taken";
      return true;
    },
  };
}

export interface ExecNetworkInput {
  client: SessionClient;
  cfg: SessionConfig;
  command: string[];
  baseEnv: NodeJS.ProcessEnv;
  remoteEnv: Record<string, string>;
  /** The transparent network started with the session (startNetworkEarly), and the target's files. */
  early?: { network: EarlyNetwork; target: Promise<TargetFiles> };
  log: (t: string) => void;
  warn: (t: string) => void;
  onError: (what: string, err: Error) => void;
}

export async function startWithNetwork(i: ExecNetworkInput): Promise<ExecNetwork> {
  const { cfg, client, log, warn, onError } = i;
  const [cmd, ...args] = i.command as [string, ...string[]];
  if (!cfg.proxy) {
    const command = startLocalCommand(cmd, args, {
      env: childEnvironment(i.baseEnv, i.remoteEnv, undefined, client.sessionId),
      warn,
    });
    return { mode: "none", command, close: async () => {} };
  }
  if (i.early) {
    const started = await startTransparent(i, i.early.network, i.early.target);
    if (started) return started;
  }
  const proxy = new LocalProxy({
    dialer: { dial: (host, port) => client.connectTcp(host, port) },
    udp: sessionUdpRelay(client, (t, err) => onError(`UDP to ${t}`, err)),
    onDialError: (t, err) => onError(`connection to ${t}`, err),
  });
  await proxy.listen();
  log(`outgoing traffic: ${proxy.urls().socks} and ${proxy.urls().http} (through the default cluster)`);
  const command = startLocalCommand(cmd, args, {
    env: childEnvironment(i.baseEnv, i.remoteEnv, proxy.urls(), client.sessionId),
    warn,
  });
  return { mode: "proxy", command, close: () => proxy.close() };
}

async function startTransparent(
  i: ExecNetworkInput,
  early: EarlyNetwork,
  targetRead: Promise<TargetFiles>,
): Promise<ExecNetwork | undefined> {
  const { cfg, client, log, warn, onError } = i;
  const { run, command, ended } = early;
  let target: TargetFiles;
  try {
    target = await targetRead;
  } catch (err) {
    await early.abandon("the target's files could not be read");
    throw err;
  }
  if (!early.take()) throw new CliError(CliErrorCode.CLOSED, "interrupted");
  run.configure({
    command: i.command,
    env: childEnvironment(i.baseEnv, i.remoteEnv, undefined, client.sessionId),
    target,
    deliverPorts: [...new Set(cfg.ports.map((p) => p.local))],
    outgoing: {
      dial: (host, port) => client.connectTcp(host, port),
      udp: sessionUdpRelay(client, (t, err) => onError(`UDP to ${t}`, err)),
    },
  });
  const r = await Promise.race([run.ready(), ended]);
  if (r.ready) {
    log(
      `network, DNS and files: the default cluster's (transparent; ${run.summary.files} file(s) of ${run.summary.mounts.length} mount(s) at their in-pod paths${cfg.keepLocal.length ? `; kept local: ${cfg.keepLocal.join(", ")}` : ""})`,
    );
    for (const s of run.summary.skipped) warn(`cannot show ${s.path} to ${i.command[0]}: ${s.reason}`);
    for (const p of run.laptopPorts)
      log(
        `local port ${p} is already served on this machine: its traffic goes there, not into ${i.command[0]}'s namespace`,
      );
    for (const p of await run.publish([...new Set(cfg.ports.map((x) => x.local))]))
      warn(
        `local port ${p} is in use on this machine: ${i.command[0]}'s port ${p} is reachable only inside its namespace`,
      );
    return {
      mode: "transparent",
      command,
      socketPathFor: (p) => run.socketPathFor(p),
      close: () => run.close(),
    };
  }
  command.takeDown();
  await ended;
  await command.finish();
  await run.close();
  if (cfg.network === "transparent")
    throw new CliError(CliErrorCode.INVALID_OPTION, `--network=transparent failed: ${r.error}`);
  warn(`transparent network failed: ${r.error}; using --network=proxy`);
  return undefined;
}
