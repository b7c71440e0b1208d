// Runs the developer's command (CMD) for `switchyard exec` so that it never outlives the CLI,
// whatever ends the CLI — a normal exit, an exception, a signal, or SIGKILL:
// - CMD runs in a process group of its own (a new session), so CMD and whatever it starts are
//   signalled as one; the CLI forwards SIGINT/SIGTERM to that group, as a terminal would.
// - A watchdog — a tiny `sh` in its own session, deaf to SIGINT/SIGTERM/SIGHUP, reading a pipe
//   whose write end only the CLI holds — sees the pipe close when the CLI process ends for any
//   reason. Unless the CLI wrote `done` first, it SIGTERMs CMD's group, SIGKILLs it after a
//   grace, and (when the CLI did not say why itself) says so on stderr. Then it removes the
//   run's private directory, if the CLI named one (the transparent network's sockets and
//   scratch files), which a killed CLI cannot remove itself. It needs only a POSIX sh, so it
//   works on Linux and macOS alike.
// - On Linux with util-linux `setpriv`, CMD also gets a parent-death signal: the kernel sends
//   it SIGTERM the moment the CLI dies, without waiting for the watchdog. It fires when the
//   thread that spawned CMD ends; Node spawns from its main thread, which lives as long as the
//   process. It reaches CMD only, not its children: the watchdog's group kill covers those.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { findExecutable } from "../sdk/local/executables.js";

/** How long CMD's group gets between SIGTERM and SIGKILL when it is taken down. */
export const KILL_GRACE_MS = 5000;
/** After CMD exited, how long the rest of its group may take to follow before it counts as left behind. */
const SETTLE_MS = 250;

const WATCHDOG = `
trap '' INT TERM HUP
pg=$1 cli=$2 name=$3 ticks=$4 dir=$5
IFS= read -r word || word=
case $word in
  done) exit 0 ;;
  stop) ;;
  *) printf 'switchyard: the CLI (pid %s) ended without stopping %s; stopping it (process group %s)\\n' "$cli" "$name" "$pg" >&2 ;;
esac
if kill -s TERM -- "-$pg" 2>/dev/null; then
  while [ "$ticks" -gt 0 ] && kill -s 0 -- "-$pg" 2>/dev/null; do sleep 0.1; ticks=$((ticks - 1)); done
  kill -s KILL -- "-$pg" 2>/dev/null
fi
[ -z "$dir" ] || rm -rf -- "$dir"
exit 0
`;

export interface LocalCommandOptions {
  env: NodeJS.ProcessEnv;
  /** Says one line on stderr (the caller prefixes it). */
  warn: (line: string) => void;
  /** ms between SIGTERM and SIGKILL when CMD's group is taken down (default KILL_GRACE_MS). */
  killGraceMs?: number;
  /** What CMD is called in messages (default `cmd`; the transparent network starts CMD through `unshare`). */
  name?: string;
  /** Use `setpriv --pdeathsig` (default: where available); false leaves the watchdog alone. */
  parentDeathSignal?: boolean;
  /**
   * A directory of the run's own that the watchdog removes once CMD's group is gone, when the
   * CLI ended without saying `done` (a killed CLI cannot remove it; a CLI that finishes does).
   */
  runDir?: string;
}

export interface LocalCommand {
  /** CMD's process; its `exit` and `error` events say how it ended. */
  readonly child: ChildProcess;
  /** Sends `sig` to CMD's whole process group (nothing when it is gone). */
  signal(sig: NodeJS.Signals): void;
  /** Takes CMD's group down: SIGTERM now, SIGKILL after the grace unless it is gone. */
  takeDown(): void;
  /**
   * Once CMD has exited: stops what it left running in its group (saying so on stderr), and
   * releases the watchdog. Call it before the CLI exits; later calls do nothing.
   */
  finish(): Promise<void>;
}

let pdeathsig: boolean | undefined;

/** True where `setpriv --pdeathsig` runs (util-linux ≥ 2.33 on Linux); probed once. */
export function parentDeathSignalAvailable(): boolean {
  if (pdeathsig === undefined) {
    pdeathsig =
      process.platform === "linux" &&
      spawnSync("setpriv", ["--pdeathsig", "SIGTERM", "--", "true"], { stdio: "ignore" }).status === 0;
  }
  return pdeathsig;
}

/** Whether `cmd` names an executable (on PATH, or as a path). */
function resolvable(cmd: string, env: NodeJS.ProcessEnv): boolean {
  return findExecutable(cmd, env) !== undefined;
}

/**
 * Whether a process of the group still runs. Where /proc exists, zombies do not count: an
 * orphan's zombie waits for init to reap it, and an init that reaps slowly would make every
 * finished command look as if it had left something behind.
 */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch {
    return false;
  }
  if (!existsSync("/proc/self/stat")) return true;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // After the parenthesised command name: state, ppid, pgrp.
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(pgrp) === pgid && state !== "Z" && state !== "X") return true;
    } catch {
      /* gone meanwhile */
    }
  }
  return false;
}

function signalGroup(pgid: number | undefined, sig: NodeJS.Signals): void {
  if (pgid === undefined) return;
  try {
    process.kill(-pgid, sig);
  } catch {
    /* the group is gone */
  }
}

/** Starts CMD in its own process group, guarded by the watchdog (and the parent-death signal on Linux). */
export function startLocalCommand(cmd: string, args: string[], o: LocalCommandOptions): LocalCommand {
  const graceMs = o.killGraceMs ?? KILL_GRACE_MS;
  // A command that does not resolve runs directly, so its error reads as before (spawn … ENOENT).
  const name = o.name ?? cmd;
  const viaSetpriv = (o.parentDeathSignal ?? true) && parentDeathSignalAvailable() && resolvable(cmd, o.env);
  const child = viaSetpriv
    ? spawn("setpriv", ["--pdeathsig", "SIGTERM", "--", cmd, ...args], {
        stdio: "inherit",
        env: o.env,
        detached: true,
      })
    : spawn(cmd, args, { stdio: "inherit", env: o.env, detached: true });
  // As leader of its own session, CMD's pid is its process group id.
  const pgid = child.pid;
  let watchdog: ChildProcess | undefined;
  if (pgid !== undefined) {
    const ticks = String(Math.ceil(graceMs / 100));
    watchdog = spawn(
      "sh",
      ["-c", WATCHDOG, "switchyard-watchdog", String(pgid), String(process.pid), name, ticks, o.runDir ?? ""],
      {
        stdio: ["pipe", "ignore", "inherit"],
        detached: true,
      },
    );
    watchdog.on("error", (err) =>
      o.warn(`no watchdog for ${name} (${err.message}): it may outlive a killed CLI`),
    );
    watchdog.stdin!.on("error", () => {}); // the watchdog gone first: nothing left to tell it
    // Neither the watchdog nor its pipe keeps the CLI running.
    watchdog.unref();
    (watchdog.stdin as unknown as { unref?: () => void }).unref?.();
  }
  let killTimer: NodeJS.Timeout | undefined;
  let finished = false;
  return {
    child,
    signal: (sig) => signalGroup(pgid, sig),
    takeDown() {
      signalGroup(pgid, "SIGTERM");
      clearTimeout(killTimer);
      killTimer = setTimeout(() => signalGroup(pgid, "SIGKILL"), graceMs);
      killTimer.unref();
    },
    async finish() {
      if (finished) return;
      finished = true;
      clearTimeout(killTimer);
      // Members signalled together with CMD may still be on their way out: give them a moment.
      const deadline = Date.now() + SETTLE_MS;
      while (pgid !== undefined && groupAlive(pgid) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
      const leftovers = pgid !== undefined && groupAlive(pgid);
      if (leftovers) o.warn(`${name} exited; stopping what it left running (process group ${pgid})`);
      if (watchdog?.stdin?.writable) {
        // `stop`: the watchdog takes the group down on its own, even if the CLI exits first.
        watchdog.stdin.end(leftovers ? "stop\n" : "done\n");
      } else if (leftovers) {
        signalGroup(pgid, "SIGTERM");
      }
    },
  };
}
