// What a node set killed with SIGKILL leaves behind once `sweepOrphans` has killed its recorded
// processes and removed its directory: containers and shims (their parents were containerd's
// shims, not the set), and with them the node's cgroups — and while a process holds them, the
// node's namespaces and veth pair. Every node cgroup is named after its set's directory, so a
// cgroup whose directory is gone is a leftover: kill what is in it, then remove it.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { envRoot } from "../processes.js";
import { listNodeCgroups, NodeCgroup } from "./node-cgroup.js";

const NODE_CGROUP = /^switchyard-(set-nodes-\d+-[0-9a-f]+)-/;

/** Kills and removes node cgroups of sets that no longer exist. Returns how many it removed. */
export async function sweepNodeLeftovers(): Promise<number> {
  let removed = 0;
  for (const name of listNodeCgroups("switchyard-set-nodes-")) {
    const m = NODE_CGROUP.exec(name);
    if (!m || existsSync(join(envRoot(), m[1]!))) continue;
    const cgroup = new NodeCgroup(name);
    await cgroup.killAll();
    await cgroup.remove();
    removed++;
  }
  return removed;
}
