// A CPU budget for one process, as a pod's CPU limit gives a container: a CFS quota in a cgroup
// of its own (cgroup v1 `cpu` controller, or cgroup v2 `cpu.max`), period 100 ms like the
// kubelet's. Needs root (or a delegated cgroup). Every group is named
// `switchyard-bench-<owner pid>-<name>`, removed once its process has exited; groups of an
// owner that died (SIGKILL) are swept by the next `sweepStaleQuotas()`.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const PERIOD_US = 100_000;
const PREFIX = "switchyard-bench-";

interface Hierarchy {
  root: string;
  write(dir: string, cpus: number): void;
}

function hierarchy(): Hierarchy | { unavailable: string } {
  const v1 = "/sys/fs/cgroup/cpu";
  if (existsSync(join(v1, "cpu.cfs_quota_us")))
    return {
      root: v1,
      write(dir, cpus) {
        writeFileSync(join(dir, "cpu.cfs_period_us"), String(PERIOD_US));
        writeFileSync(join(dir, "cpu.cfs_quota_us"), String(Math.round(cpus * PERIOD_US)));
      },
    };
  const v2 = "/sys/fs/cgroup";
  try {
    if (readFileSync(join(v2, "cgroup.subtree_control"), "utf8").split(/\s+/).includes("cpu"))
      return {
        root: v2,
        write(dir, cpus) {
          writeFileSync(join(dir, "cpu.max"), `${Math.round(cpus * PERIOD_US)} ${PERIOD_US}`);
        },
      };
  } catch {
    /* no cgroup v2 */
  }
  return { unavailable: "no writable cgroup cpu controller (/sys/fs/cgroup/cpu or cgroup v2 cpu.max)" };
}

/** Why CPU quotas cannot be set here, or undefined when they can. */
export function cpuQuotaUnavailable(): string | undefined {
  const h = hierarchy();
  if ("unavailable" in h) return h.unavailable;
  const probe = join(h.root, `${PREFIX}${process.pid}-probe`);
  try {
    mkdirSync(probe);
    h.write(probe, 0.5);
    rmdirSync(probe);
    return undefined;
  } catch (err) {
    try {
      rmdirSync(probe);
    } catch {
      /* not created */
    }
    return `cannot create a cgroup under ${h.root} (${(err as Error).message}); run as root`;
  }
}

export class CpuQuota {
  private readonly dir: string;

  /** A group allowing `cpus` CPUs (e.g. 0.5) to the processes added to it. */
  constructor(name: string, cpus: number) {
    const h = hierarchy();
    if ("unavailable" in h) throw new Error(`CPU quota ${name}: ${h.unavailable}`);
    this.dir = join(h.root, `${PREFIX}${process.pid}-${name}`);
    mkdirSync(this.dir, { recursive: true });
    h.write(this.dir, cpus);
  }

  /** Moves the process (every thread) into the group. */
  add(pid: number): void {
    writeFileSync(join(this.dir, "cgroup.procs"), String(pid));
  }

  /** Removes the group; its processes must have exited (retried briefly while they finish). */
  async remove(): Promise<void> {
    for (let i = 0; i < 50; i++) {
      try {
        rmdirSync(this.dir);
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    process.stderr.write(`could not remove cgroup ${this.dir}: a process is still in it\n`);
  }
}

/** Removes the empty groups of owners that are gone. */
export function sweepStaleQuotas(): void {
  const h = hierarchy();
  if ("unavailable" in h) return;
  for (const d of readdirSync(h.root)) {
    const m = new RegExp(`^${PREFIX}(\\d+)-`).exec(d);
    if (!m || existsSync(`/proc/${m[1]}`)) continue;
    try {
      rmdirSync(join(h.root, d));
    } catch {
      /* still has processes: leave it */
    }
  }
}
