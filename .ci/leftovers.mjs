// What a test run left behind, for CI to fail on (see .ci/run):
//   node .ci/leftovers.mjs snapshot FILE        before the run: the processes already running
//   node .ci/leftovers.mjs check FILE TMPDIR    after it: processes and files the run left
// A process is the run's when it carries the run's mark (SWITCHYARD_TEST_RUN in its environment,
// which every descendant inherits) or, started during the run, its command line names the
// checkout, the run's TMPDIR, or a binary of the test environment (kube-apiserver, etcd,
// kube-controller-manager) or the e2e local app. A file is the run's when it is left in the
// run's private TMPDIR. Leftover processes are listed, then killed; the exit code is 1 if any.
/* global process, console */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const checkout = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const BINARIES = /(^|\/)(kube-apiserver|kube-controller-manager|etcd)(-v[\d.]+)?$/;
const FIXTURES = /test\/e2e\/fixtures\/local-app\.mjs/;
/** Entries of TMPDIR that are caches, not leftovers: tsx's compile cache (`tsx-<uid>`). */
const CACHES = [/^tsx-\d+$/];

/** [{ pid, ppid, start, zombie, args, env }] of every process we can see. */
function processes() {
  if (existsSync("/proc/self/stat")) {
    const out = [];
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
        const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        let env = "";
        try {
          env = readFileSync(`/proc/${entry}/environ`, "utf8");
        } catch {
          /* not ours to read */
        }
        out.push({
          pid: Number(entry),
          ppid: Number(f[1]),
          start: f[19],
          zombie: f[0] === "Z" || f[0] === "X",
          args: readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").filter(Boolean),
          env,
        });
      } catch {
        /* gone meanwhile */
      }
    }
    return out;
  }
  // macOS and other systems without /proc: ps, without environments.
  const text = execFileSync("ps", ["-axo", "pid=,ppid=,stat=,lstart=,command="], { encoding: "utf8" });
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const m = /^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+\s+\S+\s+\d+\s+[\d:]+\s+\d+)\s+(.*)$/.exec(line);
      if (!m) return undefined;
      return {
        pid: Number(m[1]),
        ppid: Number(m[2]),
        start: m[4],
        zombie: m[3].startsWith("Z"),
        args: m[5].split(" "),
        env: "",
      };
    })
    .filter(Boolean);
}

const key = (p) => `${p.pid}@${p.start}`;

function ancestors(all) {
  const byPid = new Map(all.map((p) => [p.pid, p]));
  const mine = new Set();
  for (let p = byPid.get(process.pid); p && !mine.has(p.pid); p = byPid.get(p.ppid)) mine.add(p.pid);
  return mine;
}

function leftoverProcesses(before, tmp) {
  const mark = process.env.SWITCHYARD_TEST_RUN;
  const all = processes();
  const skip = ancestors(all);
  return all.filter((p) => {
    if (p.zombie || skip.has(p.pid)) return false;
    if (mark && p.env.split("\0").includes(`SWITCHYARD_TEST_RUN=${mark}`)) return true;
    if (before.has(key(p))) return false;
    return p.args.some(
      (a) => a.includes(checkout) || a.includes(tmp) || BINARIES.test(a) || FIXTURES.test(a),
    );
  });
}

function leftoverFiles(tmp) {
  const found = { leftovers: [] };
  if (!existsSync(tmp)) return found;
  for (const entry of readdirSync(tmp)) {
    if (CACHES.some((c) => c.test(entry))) continue;
    const path = join(tmp, entry);
    // The environment's root may stay, empty: what counts is what is in it.
    if (entry === "switchyard-env") {
      for (const e of readdirSync(path)) found.leftovers.push(join(path, e));
      continue;
    }
    found.leftovers.push(path);
  }
  return found;
}

const [mode, file, tmp] = process.argv.slice(2);
if (mode === "snapshot" && file) {
  writeFileSync(file, JSON.stringify(processes().map(key)));
} else if (mode === "check" && file && tmp) {
  const before = new Set(JSON.parse(readFileSync(file, "utf8")));
  const procs = leftoverProcesses(before, resolve(tmp));
  const files = leftoverFiles(resolve(tmp));
  if (procs.length === 0 && files.leftovers.length === 0) {
    console.error("leftovers: none (no process, no file)");
    process.exit(0);
  }
  console.error(
    "leftovers: the test run left these behind (every test must stop and remove what it starts):",
  );
  for (const p of procs) console.error(`  process ${p.pid}: ${p.args.join(" ").slice(0, 300)}`);
  for (const f of files.leftovers) console.error(`  file    ${f}`);
  for (const p of procs) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      /* gone meanwhile */
    }
  }
  if (procs.length > 0) console.error(`leftovers: killed ${procs.length} process(es)`);
  process.exit(1);
} else {
  console.error(`usage: node ${basename(process.argv[1])} snapshot FILE | check FILE TMPDIR`);
  process.exit(2);
}
