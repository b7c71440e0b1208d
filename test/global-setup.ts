// Global setup of the integration project: builds the test binaries once (cached by
// version) and, on teardown, kills whatever a crashed, killed or timed-out test file
// (a worker of this process) left running and removes its directories.
import { ensureBinaries } from "./env/binaries.js";
import { sweepOrphans } from "./env/processes.js";

export default async function setup(): Promise<() => Promise<void>> {
  await sweepOrphans();
  await ensureBinaries(["etcd", "kube-apiserver", "kube-controller-manager"]);
  return async () => {
    const killed = await sweepOrphans({ mine: true });
    if (killed > 0) process.stderr.write(`[test/env] teardown killed ${killed} leftover process(es)\n`);
  };
}
