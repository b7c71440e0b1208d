// A process that owns real nodes and is SIGKILLed leaves containers, shims and cgroups behind
// (containerd's shims are not its children); the process sweep and the node sweep together
// must leave the host exactly as it was before the owner started.
import { spawn } from "node:child_process";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureBinaries } from "../../env/binaries.js";
import { baselineHostState, diffHostState, snapshotHostState } from "../../env/nodes/host-state.js";
import { sweepNodeLeftovers } from "../../env/nodes/leftovers.js";
import { sweepOrphans } from "../../env/processes.js";
import { eventually } from "../../support/poll.js";

const root = new URL("../../..", import.meta.url).pathname;

// A first run builds the node binaries (about 3 minutes on 2 cores), before the owner's clock starts.
beforeAll(async () => {
  await ensureBinaries(["kubelet", "kube-proxy", "kube-scheduler", "coredns"]);
}, 600_000);

describe("real nodes of a SIGKILLed owner", () => {
  it("are swept by the next start, and the host is as it was", async () => {
    const before = await baselineHostState();
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "test/integration/nodes/fixtures/killed-node-owner.ts"],
      {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr.on("data", (b: Buffer) => (out += b.toString()));
    const exited = new Promise<void>((r) => child.on("exit", () => r()));
    await eventually("the owner ready", () => out.includes("ready\n"), {
      timeoutMs: 180_000,
      intervalMs: 200,
      giveUp: () => (child.exitCode !== null ? new Error(`the owner exited early:\n${out}`) : undefined),
    });
    const during = diffHostState(before, await snapshotHostState());
    expect(during.some((l) => l.startsWith("+ links:"))).toBe(true);
    child.kill("SIGKILL");
    await exited;
    await sweepOrphans();
    expect(await sweepNodeLeftovers()).toBe(1);
    // Killed processes may stay zombies for a moment, and a namespace goes with its last process.
    const left = await eventually(
      "the host as it was",
      async () => {
        const diff = diffHostState(before, await snapshotHostState());
        return diff.length === 0 ? diff : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 250 },
    ).catch(async () => diffHostState(before, await snapshotHostState()));
    expect(left).toEqual([]);
  });
});
