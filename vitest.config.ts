// Three projects, run one after another (sequence.groupOrder):
// - `unit`: fast, no external processes beyond loopback sockets;
// - `integration`: real kube-apiserver/etcd/kube-controller-manager from test/env and real
//   component processes; every file starts its own cluster set on ports of its own (test/env/ports.ts
//   gives each worker its own range), so three files run side by side: they mostly wait on their
//   clusters, and three keep the 2 CPUs busier than two did;
// - `integration-serial`: the files that need the host to themselves, one at a time, after the
//   rest: real nodes and pods (kubelets, containerd, iptables, the host-state baselines) and the
//   embedded stack (its workload clusters' fixed loopback addresses, 127.0.0.2:8080 and up).
import { defineConfig } from "vitest/config";

const integrationFiles = [
  "test/integration/**/*.test.ts",
  "test/e2e/**/*.test.ts",
  "test/pods/**/*.test.ts",
  "test/fuzz/**/*.test.ts",
  "**/*.integration.test.ts",
];

/**
 * Real nodes and real pods: they need root and the Debian packages of
 * test/env/nodes/install-host-packages.sh, and fail, never skip, without them.
 */
const nodeFiles = [
  "test/integration/nodes/**/*.test.ts",
  "test/pods/**/*.test.ts",
  "test/integration/branching/pod-branches.test.ts",
  "test/integration/branching/mysql-pod-branches.test.ts",
];

/** Files that need the host to themselves (see above): the node files and the embedded stack's. */
const serialFiles = [
  ...nodeFiles,
  "test/e2e/**/*.test.ts",
  "test/integration/checkers/live-metrics.test.ts",
  "test/integration/env/stack-signals.test.ts",
];

// SWITCHYARD_TEST_NODES=0 leaves the node files out on a machine that cannot run them (the
// summary says so); CI never sets it.
const withoutNodes = process.env.SWITCHYARD_TEST_NODES === "0" ? nodeFiles : [];

const integration = {
  globalSetup: ["./test/global-setup.ts"],
  setupFiles: ["./test/file-leaks.ts"],
  testTimeout: 120_000,
  hookTimeout: 240_000,
};

export default defineConfig({
  test: {
    reporters: ["default", "./test/summary-reporter.ts"],
    projects: [
      {
        test: {
          name: "unit",
          include: [
            "{lib,proto,control-plane,data-plane,cli,bench,test/env,test/lint,test/support,test/peers}/**/*.test.ts",
          ],
          exclude: ["**/node_modules/**", "**/dist/**", "**/*.integration.test.ts"],
          testTimeout: 20_000,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          name: "integration",
          include: integrationFiles,
          exclude: ["**/node_modules/**", "**/dist/**", ...serialFiles, ...withoutNodes],
          ...integration,
          maxWorkers: 3,
          sequence: { groupOrder: 1 },
        },
      },
      {
        test: {
          name: "integration-serial",
          include: serialFiles,
          exclude: ["**/node_modules/**", "**/dist/**", ...withoutNodes],
          ...integration,
          fileParallelism: false,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
