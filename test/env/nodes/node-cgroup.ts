// The cgroup root of one node, created in every mounted hierarchy (cgroup v1 here: the kubelet
// refuses a `cgroupRoot` missing from any of them). The node's own processes go to
// `<root>/system`, the kubelet puts pods under `<root>/kubepods`, so the whole node — daemons,
// shims and containers — is one subtree: its memory is read from one file, and teardown kills
// whatever is left in it (a shim outlives containerd) before removing it.
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { sleep } from "../../../lib/abortable-sleep.js";

const CGROUP_FS = "/sys/fs/cgroup";

export interface NodeMemory {
  usageBytes: number;
  rssBytes: number;
  pssBytes: number;
}

export class NodeCgroupError extends Error {
  readonly code = "SWITCHYARD_TEST_NODE_CGROUP_FAILED";
}

/** Mount points of every cgroup hierarchy (v1 controllers, named ones and the v2 unified tree). */
export function cgroupHierarchies(): string[] {
  const out: string[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const [left, right] = line.split(" - ");
    if (!left || !right) continue;
    const fstype = right.split(" ")[0];
    if (fstype === "cgroup" || fstype === "cgroup2") out.push(left.split(" ")[4]!);
  }
  return out;
}

/** Every directory below `dir`, deepest first (the order rmdir needs). */
function subtree(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p, { throwIfNoEntry: false })?.isDirectory()) out.push(...subtree(p), p);
  }
  return out;
}

function readPids(file: string): number[] {
  try {
    return readFileSync(file, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((s) => Number(s));
  } catch {
    return [];
  }
}

export class NodeCgroup {
  /** `name` is one path segment, e.g. `switchyard-nodes-123-ab12cd34-east`. */
  constructor(readonly name: string) {
    if (!/^[A-Za-z0-9][-A-Za-z0-9_.]*$/.test(name)) throw new NodeCgroupError(`bad cgroup name ${name}`);
  }

  /** The kubelet's `cgroupRoot`. */
  get root(): string {
    return `/${this.name}`;
  }

  private dirs(): string[] {
    return cgroupHierarchies().map((h) => join(h, this.name));
  }

  /** Creates `<root>` and `<root>/system` in every hierarchy (cpusets inherit the parent's CPUs and memory nodes). */
  create(): void {
    for (const h of cgroupHierarchies()) {
      for (const rel of [this.name, join(this.name, "system")]) {
        const dir = join(h, rel);
        if (!existsSync(dir)) {
          try {
            mkdirSync(dir);
          } catch (err) {
            throw new NodeCgroupError(`could not create cgroup ${dir}: ${(err as Error).message}`);
          }
        }
        const cpus = join(dir, "cpuset.cpus");
        if (existsSync(cpus) && readFileSync(cpus, "utf8").trim() === "") {
          const parent = join(dir, "..");
          writeFileSync(cpus, readFileSync(join(parent, "cpuset.cpus")));
          writeFileSync(join(dir, "cpuset.mems"), readFileSync(join(parent, "cpuset.mems")));
        }
      }
    }
  }

  /** A shell snippet that moves the shell itself (`$$`) into `<root>/system` of every hierarchy. */
  enterScript(): string {
    return this.dirs()
      .map((d) => `echo $$ > '${join(d, "system", "cgroup.procs")}'`)
      .join(" && ");
  }

  /** Every process in the node's subtree. */
  pids(): number[] {
    const seen = new Set<number>();
    for (const d of this.dirs()) {
      if (!existsSync(d)) continue;
      for (const sub of [d, ...subtree(d)]) for (const p of readPids(join(sub, "cgroup.procs"))) seen.add(p);
    }
    return [...seen];
  }

  /**
   * Memory of the whole node, in bytes: the memory controller's usage (page cache included: image
   * layers, binaries) and anonymous RSS, and the proportional set size of its processes (shared
   * pages split between their users: what the node costs beside everything else).
   */
  memory(): NodeMemory | undefined {
    const dir = this.dirs().find((d) => d === join(CGROUP_FS, "memory", this.name));
    if (!dir || !existsSync(dir)) return undefined;
    const usage = Number(readFileSync(join(dir, "memory.usage_in_bytes"), "utf8"));
    const stat = readFileSync(join(dir, "memory.stat"), "utf8");
    const rss = Number(/^total_rss (\d+)$/m.exec(stat)?.[1] ?? 0);
    let pss = 0;
    for (const pid of this.pids()) {
      try {
        const kb = /^Pss:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"))?.[1];
        pss += Number(kb ?? 0) * 1024;
      } catch {
        /* gone meanwhile */
      }
    }
    return { usageBytes: usage, rssBytes: rss, pssBytes: pss };
  }

  /** CPU time used by the whole node so far, in ns (cpuacct), or undefined without that controller. */
  cpuUsageNs(): number | undefined {
    const file = join(CGROUP_FS, "cpuacct", this.name, "cpuacct.usage");
    return existsSync(file) ? Number(readFileSync(file, "utf8")) : undefined;
  }

  /** SIGKILLs every process left in the subtree until none is left (bounded). Returns how many it killed. */
  async killAll(timeoutMs = 10_000): Promise<number> {
    let killed = 0;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const pids = this.pids();
      if (pids.length === 0) return killed;
      if (Date.now() > deadline)
        throw new NodeCgroupError(`processes ${pids.join(", ")} in cgroup ${this.name} did not die`);
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
          killed++;
        } catch {
          /* gone meanwhile */
        }
      }
      await sleep(50);
    }
  }

  /** Removes the subtree in every hierarchy (after `killAll`); retries while the kernel still holds it. */
  async remove(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (const d of this.dirs()) {
      if (!existsSync(d)) continue;
      for (const dir of [...subtree(d), d]) {
        for (;;) {
          try {
            rmdirSync(dir);
            break;
          } catch (err) {
            const code = (err as NodeJS.ErrnoException).code;
            if (code === "ENOENT") break;
            if (Date.now() > deadline)
              throw new NodeCgroupError(`could not remove cgroup ${dir}: ${(err as Error).message}`);
            await sleep(50);
          }
        }
      }
    }
  }
}

/** Names of the top-level cgroups starting with `prefix`, in any hierarchy. */
export function listNodeCgroups(prefix: string): string[] {
  const names = new Set<string>();
  for (const h of cgroupHierarchies())
    for (const e of readdirSync(h))
      if (e.startsWith(prefix) && statSync(join(h, e), { throwIfNoEntry: false })?.isDirectory())
        names.add(e);
  return [...names];
}
