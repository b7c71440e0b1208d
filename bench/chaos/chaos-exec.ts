// `switchyard exec --steal -- node local-app.mjs` as a developer runs it, for the chaos bench:
// started against the pod stack, awaited until it steals through every workload cluster's
// demo NodePort with the demo rolled out, and watched while it runs — each line of its
// stderr gets the time it was first seen, so the bench knows when the CLI lost its router
// connection and when it was back (`switchyard: router connection lost …`,
// `switchyard: reconnected through …`).
import { request } from "node:http";
import type { PodStack } from "../../test/env/stack/pod-stack.js";
import { freePorts } from "../../test/env/ports.js";
import { launch, type LaunchedProcess } from "../../test/support/launch.js";
import { eventually } from "../../test/support/poll.js";
import { stealExecCommand } from "../support/pod-stack-run.js";
import { adminKc, demoRolledOut } from "./chaos-stack.js";

export interface TimedLine {
  at: number;
  line: string;
}

export interface StealExec {
  proc: LaunchedProcess;
  localPort: number;
  /** The MultiClusterSession's name (from "created multi-cluster session mc-…"). */
  sessionId: string;
  /** Output lines with the time each was first seen (polled every 20 ms). */
  lines: TimedLine[];
  /** Stops watching the output. */
  unwatch(): void;
}

/** One GET on a connection of its own; `x-served-by` of the answer (undefined on any failure). */
export function servedBy(url: string, timeoutMs = 2000, headers: Record<string, string> = {}) {
  return new Promise<string | undefined>((resolve) => {
    const req = request(url, { agent: false, headers, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.headers["x-served-by"] as string | undefined));
      res.on("error", () => resolve(undefined));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", () => resolve(undefined));
    req.end();
  });
}

/** Resolves once a fresh connection through every cluster's NodePort is answered by `name`. */
export async function stealingEverywhere(stack: PodStack, name: string, timeoutMs: number, path = "/ready") {
  await Promise.all(
    Object.values(stack.workloads).map((w) =>
      eventually(
        `a stolen request through ${w.name}'s NodePort`,
        async () => (await servedBy(`${w.demoUrl}${path}`)) === name,
        { timeoutMs, intervalMs: 100 },
      ),
    ),
  );
}

/** Starts the exec; resolves once it steals through every workload cluster and both demos rolled out. */
export async function startStealExec(
  stack: PodStack,
  o: { name: string; env?: Record<string, string>; readyTimeoutMs?: number },
): Promise<StealExec> {
  const localPort = (await freePorts(1))[0]!;
  const lines: TimedLine[] = [];
  let watched: LaunchedProcess<unknown> | undefined;
  let seen = 0;
  let partial = "";
  const poll = () => {
    const out = watched?.output() ?? "";
    if (out.length <= seen) return;
    const fresh = partial + out.slice(seen);
    seen = out.length;
    const parts = fresh.split("\n");
    partial = parts.pop()!;
    const at = performance.now();
    for (const line of parts) lines.push({ at, line });
  };
  // Watched from its spawn, so a failed start says when each progress line came.
  const watcher = setInterval(poll, 20);
  const spawnedAt = performance.now();
  const timeline = () =>
    lines.map((l) => `+${((l.at - spawnedAt) / 1000).toFixed(2)} s ${l.line}`).join("\n");
  let proc: LaunchedProcess;
  try {
    proc = await launch({
      name: `switchyard-exec-${o.name}`,
      ...stealExecCommand(stack, localPort),
      env: { LOCAL_PORT: String(localPort), LOCAL_NAME: "local", ...o.env },
      ready: (p) => p.output().includes("local app ready"),
      readyTimeoutMs: o.readyTimeoutMs ?? 180_000,
      readyIntervalMs: 100,
      onStart: (p) => (watched = p),
    });
  } catch (err) {
    poll();
    clearInterval(watcher);
    (err as Error).message += `\nCLI output with the time each line was seen:\n${timeline()}`;
    throw err;
  }
  poll();
  const sessionId = /created multi-cluster session (mc-[0-9a-f]+)/.exec(proc.output())?.[1];
  const e: StealExec = {
    proc,
    localPort,
    sessionId: sessionId ?? "",
    lines,
    unwatch: () => clearInterval(watcher),
  };
  try {
    if (!sessionId) throw new Error("the CLI did not name its session");
    await stealingEverywhere(stack, "local", 120_000);
    for (const c of Object.keys(stack.workloads))
      await eventually(
        `${c}'s demo rolled out with the agent`,
        () => demoRolledOut(adminKc(stack, c), true),
        {
          timeoutMs: 120_000,
          intervalMs: 250,
        },
      );
    return e;
  } catch (err) {
    e.unwatch();
    await proc.stop(0, "SIGKILL");
    poll();
    (err as Error).message += `\nCLI output with the time each line was seen:\n${timeline()}`;
    throw err;
  }
}

/** Ctrl-C as a developer stops it (the session is deleted on the way out); its exit status. */
export async function stopExec(e: StealExec): Promise<number | string> {
  e.unwatch();
  await e.proc.stop(60_000, "SIGINT");
  return e.proc.exited;
}

/** The periods the CLI had no router connection: from its first "connection lost" to "reconnected". */
export function disconnections(lines: readonly TimedLine[]): { startAt: number; endAt: number }[] {
  const out: { startAt: number; endAt: number }[] = [];
  let lostAt: number | undefined;
  for (const { at, line } of lines) {
    if (lostAt === undefined && /router connection lost/.test(line)) lostAt = at;
    else if (lostAt !== undefined && /reconnected through/.test(line)) {
      out.push({ startAt: lostAt, endAt: at });
      lostAt = undefined;
    }
  }
  if (lostAt !== undefined) out.push({ startAt: lostAt, endAt: Infinity });
  return out;
}
