// kube-scheduler of one cluster with real nodes: a host process beside the API server (it is part
// of the control plane, not of the node), as `system:kube-scheduler` — the default RBAC binds that
// user — without leader election and without a serving port.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { TestCluster } from "../clusters/cluster-set.js";
import type { ManagedProcess, ProcessGroupDir } from "../processes.js";
import { writeKubeconfig } from "../clusters/kubeconfig.js";

export async function startScheduler(
  group: ProcessGroupDir,
  cluster: TestCluster,
  bin: string,
): Promise<ManagedProcess> {
  const dir = join(group.dir, `${cluster.name}-scheduler`);
  mkdirSync(dir, { recursive: true });
  const pair = await cluster.ca.issue({
    commonName: "system:kube-scheduler",
    usage: "client",
    validForSeconds: 30 * 86_400,
  });
  const kubeconfig = writeKubeconfig(join(dir, "scheduler.kubeconfig"), {
    clusterName: cluster.name,
    server: cluster.server,
    caPem: cluster.caPem,
    user: "system:kube-scheduler",
    ...pair,
  });
  return group.spawn(
    `${cluster.name}-kube-scheduler`,
    bin,
    [`--kubeconfig=${kubeconfig}`, "--leader-elect=false", "--secure-port=0", "--v=1"],
    { cwd: dir },
  );
}
