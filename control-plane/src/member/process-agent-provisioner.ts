// `process` provisioning: one local agent process per target, serving the pod the
// target resolved to (embedded environment and tests, where there is no kubelet and no
// pod network). Agents are spawned detached and recorded in a private state directory
// (pid and its start time, port, pod, secret hash), so a restarted control plane adopts
// the agents still running instead of starting new ones; a record whose process is gone
// or does not answer /healthz is replaced. A recorded pid is signalled only while it
// still names the process that was recorded (same start time): pids are reused, and a
// record that outlived its agent must not kill whatever runs under that pid now. The
// launch command is configurable (tests may use a fake agent); flags follow
// data-plane/agent's main.ts.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { OptionError, positive } from "../../../lib/option-error.js";
import {
  agentIdForPod,
  type AgentProvisioner,
  type EnsureAgentsInput,
  type EnsureAgentsResult,
} from "./agent-provisioner.js";
import { sha256Hex } from "./agent-secret-store.js";
import { defaultAgentStateDir, preparePrivateDirs } from "./agent-state-dir.js";
import { AgentLaunchError } from "./member-errors.js";
import { isSameProcess, processStartTime } from "./process-start-time.js";
import type { ResolvedTarget } from "./target-resolver.js";

export interface AgentCommand {
  /** Executable, e.g. process.execPath. */
  command: string;
  /** Arguments before the agent flags, e.g. ["--import", "tsx", "data-plane/agent/src/main.ts"]. */
  args: string[];
  /** Working directory (default: the repository root). */
  cwd?: string;
}

export interface ProcessAgentProvisionerOptions {
  /** Kubeconfig file the agent reads its pod with (`--kubeconfig`). */
  kubeconfigPath: string;
  /** How to start an agent (default: the agent of this repository, via tsx from source or node from dist). */
  agentCommand?: AgentCommand;
  /** Host the agent listens on and routers dial (default "127.0.0.1"). */
  host?: string;
  /** `--outbound-bind` for outgoing connections (default: none). */
  outboundBind?: string;
  /** `--app-port` values for a target (default: each TCP containerPort P of the container as `P:0`). */
  appPorts?: (resolved: ResolvedTarget, pod: V1Pod) => string[];
  /**
   * With the default `appPorts`: the agent accepts an app port P's traffic on P + offset
   * instead of an ephemeral port, so a local environment has stable addresses to send to.
   */
  trafficPortOffset?: number;
  /** Extra flags appended to every agent command line. */
  extraArgs?: string[];
  /**
   * Where agent records and logs live: a private directory, created with mode 0700 and
   * refused when another user owns it or group or others may use it (see
   * agent-state-dir.ts). Default: `$XDG_RUNTIME_DIR/switchyard-agents`, else
   * `<tmpdir>/switchyard-agents-<uid>`, with `stateSubdir` below it.
   */
  stateDir?: string;
  /** With the default `stateDir`: a sub-directory of it, one path segment (the control plane gives its cluster name). */
  stateSubdir?: string;
  /** How long an agent may take to answer /healthz, ms (default 20 000). */
  startTimeoutMs?: number;
  /** How often `watch` checks that recorded agents are still running, ms (default 2000). */
  livenessIntervalMs?: number;
  /** Environment of agent processes (default: this process's). */
  env?: NodeJS.ProcessEnv;
  logger?: Logger;
}

interface AgentRecord {
  targetId: string;
  pid: number;
  /** The process's start time (process-start-time.ts); empty when it could not be read. */
  startTime: string;
  port: number;
  host: string;
  podName: string;
  secretHash: string;
}

export class ProcessAgentProvisioner implements AgentProvisioner {
  readonly mode = "process" as const;
  readonly #o: Required<Pick<ProcessAgentProvisionerOptions, "host" | "stateDir" | "startTimeoutMs">> &
    ProcessAgentProvisionerOptions;
  readonly #command: AgentCommand;
  readonly #logger: Logger | undefined;
  readonly #goneListeners = new Set<(targetId: string) => void>();
  /** Pids not to report: already reported, or being stopped on purpose (kept until their record goes). */
  readonly #reported = new Set<number>();
  /** Agents this process started and that have not exited, by pid: known for sure without /proc. */
  readonly #children = new Map<number, ChildProcess>();

  constructor(options: ProcessAgentProvisionerOptions) {
    if (!options.kubeconfigPath) throw new OptionError("kubeconfigPath", "is required for process agents");
    const startTimeoutMs = positive("startTimeoutMs", options.startTimeoutMs, 20_000);
    if (options.livenessIntervalMs !== undefined)
      positive("livenessIntervalMs", options.livenessIntervalMs, 0);
    this.#o = {
      ...options,
      host: options.host ?? "127.0.0.1",
      stateDir: stateDirOf(options),
      startTimeoutMs,
    };
    this.#command = options.agentCommand ?? defaultAgentCommand();
    this.#logger = options.logger;
  }

  async ensure({ resolved, secretHash, signal }: EnsureAgentsInput): Promise<EnsureAgentsResult> {
    const record = this.#load(resolved.id);
    const ready = resolved.readyPods;
    if (
      record &&
      ready.some((p) => p.metadata?.name === record.podName) &&
      record.secretHash === secretHash
    ) {
      if (this.#runs(record) && (await healthy(record))) {
        const pod = ready.find((p) => p.metadata?.name === record.podName)!;
        return { agents: [{ id: agentIdForPod(record.podName, sha256Hex), pod, baseUrl: baseUrl(record) }] };
      }
    }
    if (record) await this.#stop(record);
    const pod = ready[0];
    if (!pod) {
      return {
        agents: [],
        waiting: {
          reason: "NoReadyPod",
          message: `no Running and Ready pod of ${resolved.target.kind} ${resolved.target.name} yet`,
        },
      };
    }
    const started = await this.#spawn(resolved, pod, secretHash, signal);
    return { agents: [{ id: agentIdForPod(started.podName, sha256Hex), pod, baseUrl: baseUrl(started) }] };
  }

  async release(target: { id: string }): Promise<void> {
    const record = this.#load(target.id);
    if (record) await this.#stop(record);
  }

  /**
   * Reports agents that died on their own: at once for agents this process started (their
   * exit event), and within `livenessIntervalMs` for adopted ones (a pid check of every
   * record). An agent this provisioner stops itself is not reported.
   */
  watch(onGone: (targetId: string) => void, signal: AbortSignal): void {
    if (signal.aborted) return;
    this.#goneListeners.add(onGone);
    const timer = setInterval(() => {
      for (const r of this.records()) if (!this.#runs(r)) this.#reportGone(r);
    }, this.#o.livenessIntervalMs ?? 2000);
    timer.unref?.();
    signal.addEventListener(
      "abort",
      () => {
        clearInterval(timer);
        this.#goneListeners.delete(onGone);
      },
      { once: true },
    );
  }

  #reportGone(record: AgentRecord): void {
    // Only the agent still on record counts: a replaced or released one was stopped on purpose.
    const current = this.#load(record.targetId);
    if (!current || current.pid !== record.pid || this.#reported.has(record.pid)) return;
    this.#reported.add(record.pid);
    this.#logger?.warn(
      { target: record.targetId, pid: record.pid, pod: record.podName },
      "a process agent stopped on its own; its sessions will get a new one",
    );
    for (const l of this.#goneListeners) l(record.targetId);
  }

  /** Stops every agent recorded in the state directory (embedded shutdown, tests). */
  async stopAll(): Promise<void> {
    for (const f of readdirSync(this.#o.stateDir).filter((n) => n.endsWith(".json"))) {
      const record = this.#read(join(this.#o.stateDir, f));
      if (record) await this.#stop(record);
    }
  }

  /** Agents currently recorded (for tests and status). */
  records(): AgentRecord[] {
    return readdirSync(this.#o.stateDir)
      .filter((n) => n.endsWith(".json"))
      .map((f) => this.#read(join(this.#o.stateDir, f)))
      .filter((r): r is AgentRecord => r !== undefined);
  }

  async #spawn(
    resolved: ResolvedTarget,
    pod: V1Pod,
    secretHash: string,
    signal: AbortSignal,
  ): Promise<AgentRecord> {
    const port = await freePort(this.#o.host);
    const podName = pod.metadata!.name!;
    const appPorts = this.#o.appPorts
      ? this.#o.appPorts(resolved, pod)
      : defaultAppPorts(pod, resolved.container, this.#o.trafficPortOffset);
    const args = [
      ...this.#command.args,
      `--listen=${this.#o.host}:${port}`,
      `--pod=${resolved.namespace}/${podName}`,
      `--container=${resolved.container}`,
      `--kubeconfig=${this.#o.kubeconfigPath}`,
      `--secret-hash=${secretHash}`,
      ...appPorts.map((p) => `--app-port=${p}`),
      ...(this.#o.outboundBind ? [`--outbound-bind=${this.#o.outboundBind}`] : []),
      ...(this.#o.extraArgs ?? []),
    ];
    const base = this.#file(resolved.id);
    const log = openSync(`${base}.log`, "a", 0o600); // appended: a replaced agent's last words stay
    let child;
    try {
      child = spawn(this.#command.command, args, {
        cwd: this.#command.cwd ?? repoRoot(),
        env: this.#o.env ?? process.env,
        detached: true, // survives a control-plane restart, which adopts it from the record
        stdio: ["ignore", log, log],
      });
    } finally {
      closeSync(log);
    }
    const pid = child.pid;
    if (pid === undefined) {
      throw new AgentLaunchError(`could not start agent "${this.#command.command}": check agentCommand`);
    }
    let exited: number | null | undefined;
    const startTime = processStartTime(pid) ?? "";
    const record: AgentRecord = {
      targetId: resolved.id,
      pid,
      startTime,
      port,
      host: this.#o.host,
      podName,
      secretHash,
    };
    let serving = false;
    this.#children.set(pid, child);
    child.once("exit", (code) => {
      this.#children.delete(pid);
      exited = code ?? -1;
      // A launch failure is the reconcile's error (with backoff); only a serving agent's death is news.
      if (serving) this.#reportGone(record);
    });
    child.unref();
    writeFileSync(`${base}.json`, JSON.stringify(record), { mode: 0o600 });
    const deadline = Date.now() + this.#o.startTimeoutMs;
    while (!(await healthy(record))) {
      if (exited !== undefined || Date.now() > deadline || signal.aborted) {
        await this.#stop(record);
        const tail = readTail(`${base}.log`);
        throw new AgentLaunchError(
          exited !== undefined
            ? `agent for ${resolved.id} exited with code ${exited} before answering /healthz: ${tail}`
            : `agent for ${resolved.id} did not answer /healthz on ${baseUrl(record)} within ${this.#o.startTimeoutMs} ms: ${tail}`,
        );
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    serving = true;
    this.#logger?.info({ target: resolved.id, pod: podName, pid, port }, "started a process agent");
    return record;
  }

  /** True while the agent `record` names runs: a child of ours, or the same pid *and* start time. */
  #runs(record: AgentRecord): boolean {
    const child = this.#children.get(record.pid);
    if (child) return child.exitCode === null && child.signalCode === null;
    return isSameProcess(record.pid, record.startTime);
  }

  /** Signals the recorded agent only while the pid still names it; false when it does not. */
  #signal(record: AgentRecord, signal: NodeJS.Signals): boolean {
    if (!this.#runs(record)) return false;
    try {
      const child = this.#children.get(record.pid);
      if (child) child.kill(signal);
      else process.kill(record.pid, signal);
      return true;
    } catch {
      return false; // exited in between
    }
  }

  /**
   * Stops the agent a record names and removes the record. A record whose pid no longer
   * names that agent (it exited; the pid may have been reused) is stale: removed, nothing
   * signalled.
   */
  async #stop(record: AgentRecord): Promise<void> {
    this.#reported.add(record.pid); // stopped on purpose: never reported as gone
    if (this.#signal(record, "SIGTERM")) {
      const deadline = Date.now() + 5000;
      while (this.#runs(record) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      this.#signal(record, "SIGKILL");
      this.#logger?.info({ target: record.targetId, pid: record.pid }, "stopped a process agent");
    } else {
      this.#logger?.info(
        { target: record.targetId, pid: record.pid },
        "removed a stale process agent record (its process is gone; the pid was not signalled)",
      );
    }
    const file = `${this.#file(record.targetId)}.json`;
    const current = this.#read(file);
    if (current?.pid === record.pid && current.startTime === record.startTime) rmSync(file, { force: true });
    this.#reported.delete(record.pid);
  }

  #file(targetId: string): string {
    return join(this.#o.stateDir, `agent-${sha256Hex(targetId).slice(0, 24)}`);
  }

  #load(targetId: string): AgentRecord | undefined {
    return this.#read(`${this.#file(targetId)}.json`);
  }

  /**
   * The record in `path`. One that does not parse or lacks a field (an older format
   * without `startTime` included) names no process it could be checked against: it reads
   * as a record of a gone agent, so it is replaced and never signalled.
   */
  #read(path: string): AgentRecord | undefined {
    if (!existsSync(path)) return undefined;
    let r: Partial<AgentRecord>;
    try {
      r = JSON.parse(readFileSync(path, "utf8")) as Partial<AgentRecord>;
    } catch {
      return undefined;
    }
    if (typeof r !== "object" || r === null || typeof r.targetId !== "string") return undefined;
    return {
      targetId: r.targetId,
      pid: Number.isInteger(r.pid) && r.pid! > 0 ? r.pid! : 0,
      startTime: typeof r.startTime === "string" ? r.startTime : "",
      port: typeof r.port === "number" ? r.port : 0,
      host: typeof r.host === "string" ? r.host : this.#o.host,
      podName: typeof r.podName === "string" ? r.podName : "",
      secretHash: typeof r.secretHash === "string" ? r.secretHash : "",
    };
  }
}

function stateDirOf(o: ProcessAgentProvisionerOptions): string {
  if (o.stateDir !== undefined) return preparePrivateDirs(o.stateDir);
  const root = defaultAgentStateDir();
  if (o.stateSubdir === undefined) return preparePrivateDirs(root);
  if (!/^[A-Za-z0-9._-]+$/.test(o.stateSubdir) || /^\.+$/.test(o.stateSubdir))
    throw new OptionError("stateSubdir", `must be one path segment, got ${JSON.stringify(o.stateSubdir)}`);
  return preparePrivateDirs(root, join(root, o.stateSubdir));
}

/** The agent of this repository: tsx on the source when running from source, node on dist otherwise. */
export function defaultAgentCommand(): AgentCommand {
  const fromSource = import.meta.url.endsWith(".ts");
  const main = fileURLToPath(
    new URL(`../../../data-plane/agent/src/main.${fromSource ? "ts" : "js"}`, import.meta.url),
  );
  return fromSource
    ? { command: process.execPath, args: ["--import", "tsx", main], cwd: repoRoot() }
    : { command: process.execPath, args: [main] };
}

function repoRoot(): string {
  return fileURLToPath(new URL("../../../", import.meta.url));
}

function defaultAppPorts(pod: V1Pod, container: string, offset: number | undefined): string[] {
  const c = pod.spec?.containers.find((x) => x.name === container);
  return [
    ...new Set(
      (c?.ports ?? [])
        .filter((p) => (p.protocol ?? "TCP") === "TCP")
        .map((p) => `${p.containerPort}:${offset ? p.containerPort + offset : 0}`),
    ),
  ];
}

function baseUrl(r: AgentRecord): string {
  return `ws://${r.host.includes(":") ? `[${r.host}]` : r.host}:${r.port}`;
}

async function healthy(r: AgentRecord): Promise<boolean> {
  try {
    const res = await fetch(`http://${r.host.includes(":") ? `[${r.host}]` : r.host}:${r.port}/healthz`, {
      signal: AbortSignal.timeout(1000),
    });
    await res.body?.cancel();
    return res.ok;
  } catch {
    return false;
  }
}

function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function readTail(path: string): string {
  try {
    return readFileSync(path, "utf8").slice(-800).trim() || "(no output)";
  } catch {
    return "(no log)";
  }
}
