// Two projects: `unit` (fast, no external processes beyond loopback sockets) and
// `integration` (real kube-apiserver/etcd/kube-controller-manager from test/env,
// one file at a time because each file starts its own cluster set on a 2-core box).
import { defineConfig } from "vitest/config";

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
        },
      },
      {
        test: {
          name: "integration",
          include: [
            "test/integration/**/*.test.ts",
            "test/e2e/**/*.test.ts",
            "test/pods/**/*.test.ts",
            "test/fuzz/**/*.test.ts",
            "**/*.integration.test.ts",
          ],
          // Real nodes and real pods (test/integration/nodes, test/pods) need root and the Debian
          // packages of test/env/nodes/install-host-packages.sh; they fail, never skip, without
          // them. SWITCHYARD_TEST_NODES=0 leaves them out on a machine that cannot run them (the
          // summary says so); CI never sets it.
          exclude: [
            "**/node_modules/**",
            "**/dist/**",
            ...(process.env.SWITCHYARD_TEST_NODES === "0"
              ? ["test/integration/nodes/**", "test/pods/**"]
              : []),
          ],
          globalSetup: ["./test/global-setup.ts"],
          fileParallelism: false,
          testTimeout: 120_000,
          hookTimeout: 240_000,
        },
      },
    ],
  },
});
