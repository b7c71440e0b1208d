// Chaos scenario 4: the developer's CLI SIGKILLed while a stolen request is in flight.
// `switchyard exec --steal` runs the local app with a slow path (LOCAL_SLOW_MS: GET /slow
// answers after 2 s) and a child of its own (LOCAL_APP_CHILD=1, as a dev server's watcher);
// a GET /slow through east's NodePort reaches the local app, and the CLI is SIGKILLed then.
//   - the caller must get an answer or an error, not hang (unanswered within the deadline:
//     lost);
//   - nothing local may outlive the CLI: its whole process tree, taken from /proc just before
//     the kill (host pids: the watchdog, setpriv and the transparent network's unshare, the
//     local app and its child; process-tree.ts), is looked at a few seconds later (what still
//     runs: orphans), and the transparent network's run directory (`switchyard-ns-*` in the
//     temporary directory), which the watchdog removes, must be gone too (also orphans);
//   - the session the CLI can no longer delete must expire: its TTL (what the CLI set, read
//     from the MultiClusterSession's spec) plus a margin after the kill, the
//     MultiClusterSession on the Primary, its ClusterSessions in the members and the agent in
//     both demo templates must be gone (what is left is leaked).
import { readdirSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sleep } from "../../lib/abortable-sleep.js";
import type { PodStack } from "../../test/env/stack/pod-stack.js";
import { eventually } from "../../test/support/poll.js";
import { startStealExec } from "./chaos-exec.js";
import { sessionRemains, sessionTtlSeconds, type SessionRemains } from "./chaos-stack.js";
import { timedGet, type Outcome } from "./chaos-traffic.js";
import { round } from "../support/stats-support.js";
import { RUN_PREFIX } from "../../cli/src/sdk/transparent/transparent-run.js";
import { descendants, nameOf, stillRunning, type HostProcess } from "./process-tree.js";

export interface ClientKillOptions {
  /** How long the local app takes to answer GET /slow, ms. */
  slowMs: number;
  /** The caller's deadline, ms. */
  callerTimeoutMs: number;
  /** After the kill, when local processes still running count as orphans, ms. */
  orphanCheckAfterMs: number;
  /** Past the TTL, how long the session's remains may take to go, ms. */
  expiryMarginMs: number;
}

export interface ClientKillResult {
  sessionId: string;
  ttlSeconds: number;
  caller: { outcome: Outcome; status?: number; error?: string; afterKillMs: number };
  /** The caller got neither an answer nor an error in time (1) or did (0). */
  lost: number;
  /** The CLI's process tree just before the kill (host pids), and what of it still ran at the check. */
  processes: { name: string; pid: number; aliveAfterCheck: boolean }[];
  /** Run directories the CLI made in the temporary directory and still there at the check. */
  filesLeft: string[];
  /** Processes still running plus run directories left. */
  orphans: number;
  /** Kill → each remain gone, s (undefined: still there at the deadline). */
  goneAfterS: Record<string, number | undefined>;
  remainsAtDeadline: SessionRemains;
  leaked: number;
}

function localGet(port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(`http://127.0.0.1:${port}${path}`, { agent: false, timeout: 2000 }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve(body));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${path}: timed out`)));
    req.on("error", reject);
    req.end();
  });
}

/** The transparent network's run directories. */
const runDirs = () => readdirSync(tmpdir()).filter((d) => d.startsWith(RUN_PREFIX));

const leakedOf = (r: SessionRemains) =>
  (r.parent ? 1 : 0) +
  Object.values(r.children).reduce((a, b) => a + b, 0) +
  Object.values(r.agentInTemplate).filter(Boolean).length;

export async function clientKilledMidRequest(
  stack: PodStack,
  o: ClientKillOptions,
): Promise<ClientKillResult> {
  const runDirsBefore = new Set(runDirs());
  const e = await startStealExec(stack, {
    name: "killed",
    env: { LOCAL_SLOW_MS: String(o.slowMs), LOCAL_APP_CHILD: "1" },
  });
  const cliPid = e.proc.pid;
  let caller: ClientKillResult["caller"];
  let killAt: number;
  let tree: (HostProcess & { name: string })[] = [];
  try {
    const ttlSeconds = await sessionTtlSeconds(stack, e.sessionId);
    if (ttlSeconds === undefined) throw new Error(`session ${e.sessionId} has no ttlSeconds in its spec`);
    // The pids the app reports are its own namespace's; the tree is taken on this machine.
    const reported = JSON.parse(await localGet(e.localPort, "/pids")) as { app: number; child?: number };
    const treeOfCli = () => descendants(cliPid!).map((p) => ({ ...p, name: nameOf(p, reported) }));
    tree = treeOfCli();
    for (const needed of ["local app", "CLI watchdog", ...(reported.child ? ["local app's child"] : [])])
      if (!tree.some((p) => p.name === needed))
        throw new Error(
          `no ${needed} below the CLI (pid ${cliPid}): ${tree.map((p) => `${p.pid} ${p.name}`).join(", ")}`,
        );
    const east = stack.workloads.east!;
    const answer = timedGet({ name: "east", url: east.demoUrl }, "/slow", false, o.callerTimeoutMs, "local");
    await eventually(
      "the slow request to reach the local app",
      async () =>
        (JSON.parse(await localGet(e.localPort, "/seen")) as { path: string }[]).some(
          (s) => s.path === "/slow",
        ),
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    // Taken again at the kill: whatever the CLI started meanwhile counts too.
    for (const p of treeOfCli()) if (!tree.some((t) => t.pid === p.pid)) tree.push(p);
    killAt = performance.now();
    e.proc.kill("SIGKILL");
    const a = await answer;
    caller = {
      outcome: a.outcome,
      ...(a.status !== undefined ? { status: a.status } : {}),
      ...(a.error !== undefined ? { error: a.error } : {}),
      afterKillMs: round(a.endAt - killAt, 1),
    };
    const checkAt = killAt + o.orphanCheckAfterMs;
    if (checkAt > performance.now()) await sleep(checkAt - performance.now());
    const checked = tree.map((p) => ({ name: p.name, pid: p.pid, aliveAfterCheck: stillRunning(p) }));
    const filesLeft = runDirs().filter((d) => !runDirsBefore.has(d));
    const goneAfterS: Record<string, number | undefined> = {};
    const deadline = killAt + ttlSeconds * 1000 + o.expiryMarginMs;
    let remains = await sessionRemains(stack, e.sessionId);
    for (;;) {
      const now = performance.now();
      const mark = (key: string, gone: boolean) => {
        if (gone && goneAfterS[key] === undefined) goneAfterS[key] = round((now - killAt) / 1000, 1);
      };
      mark("MultiClusterSession", !remains.parent);
      for (const [c, n] of Object.entries(remains.children)) mark(`ClusterSession ${c}`, n === 0);
      for (const [c, has] of Object.entries(remains.agentInTemplate)) mark(`agent in ${c}'s template`, !has);
      if (leakedOf(remains) === 0 || now > deadline) break;
      await sleep(1000);
      remains = await sessionRemains(stack, e.sessionId);
    }
    for (const key of [
      "MultiClusterSession",
      ...Object.keys(remains.children).map((c) => `ClusterSession ${c}`),
      ...Object.keys(remains.agentInTemplate).map((c) => `agent in ${c}'s template`),
    ])
      goneAfterS[key] ??= undefined;
    return {
      sessionId: e.sessionId,
      ttlSeconds,
      caller,
      lost: caller.outcome === "timeout" ? 1 : 0,
      processes: checked,
      filesLeft,
      orphans: checked.filter((p) => p.aliveAfterCheck).length + filesLeft.length,
      goneAfterS,
      remainsAtDeadline: remains,
      leaked: leakedOf(remains),
    };
  } finally {
    e.unwatch();
    await e.proc.stop(0, "SIGKILL");
    // Nothing of this run may stay behind for what comes next, whatever was counted above.
    for (const p of tree)
      if (stillRunning(p))
        try {
          process.kill(p.pid, "SIGKILL");
        } catch {
          /* gone meanwhile */
        }
    for (const d of runDirs())
      if (!runDirsBefore.has(d)) rmSync(join(tmpdir(), d), { recursive: true, force: true });
  }
}
