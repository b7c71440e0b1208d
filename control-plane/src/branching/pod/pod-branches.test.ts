import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { branchPodState } from "./pod-branches.js";

const pod = (status: V1Pod["status"], deleting = false): V1Pod => ({
  metadata: { name: "sy-x", ...(deleting ? { deletionTimestamp: new Date() } : {}) },
  status,
});
const container = (c: object) => ({
  containerStatuses: [{ name: "database", image: "i", imageID: "", ready: false, restartCount: 0, ...c }],
});

describe("branchPodState", () => {
  it("Ready only when the pod and the database container are", () => {
    expect(
      branchPodState(
        pod({
          phase: "Running",
          conditions: [{ type: "Ready", status: "True" }],
          ...container({ ready: true, state: { running: {} } }),
        }),
      ),
    ).toEqual({ state: "ready" });
    expect(branchPodState(pod({ phase: "Running", ...container({ state: { running: {} } }) }))).toEqual({
      state: "starting",
      detail: "seeding (the server does not listen yet)",
    });
  });

  it("a non-zero exit, now or before a restart, is a failed seed quoting the message's tail", () => {
    const message = `${"x".repeat(3000)}\npg_dump: error: password authentication failed`;
    const s = branchPodState(
      pod({
        phase: "Running",
        ...container({
          state: { waiting: { reason: "CrashLoopBackOff" } },
          lastState: { terminated: { exitCode: 1, reason: "Error", message } },
        }),
      }),
    );
    expect(s.state).toBe("seedFailed");
    expect(s.state === "seedFailed" && s.detail).toMatch(
      /^exit code 1: x+\npg_dump: error: password authentication failed$/,
    );
    expect(s.state === "seedFailed" && s.detail.length).toBeLessThan(1600);
    const oom = branchPodState(
      pod({
        phase: "Running",
        ...container({ state: { terminated: { exitCode: 137, reason: "OOMKilled" } } }),
      }),
    );
    expect(oom).toEqual({ state: "seedFailed", detail: "exit code 137, OOMKilled" });
  });

  it("an image the node cannot get, unscheduled, stopped and deleted pods", () => {
    for (const reason of ["ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull"]) {
      expect(
        branchPodState(
          pod({
            phase: "Pending",
            ...container({ state: { waiting: { reason, message: "no such image" } } }),
          }),
        ),
      ).toEqual({
        state: "imageUnavailable",
        detail: `${reason}: no such image`,
      });
    }
    expect(
      branchPodState(
        pod({
          phase: "Pending",
          conditions: [{ type: "PodScheduled", status: "False", message: "0/1 nodes are available" }],
        }),
      ),
    ).toEqual({ state: "starting", detail: "not scheduled: 0/1 nodes are available" });
    expect(branchPodState(pod({ phase: "Failed", reason: "Evicted" })).state).toBe("stopped");
    expect(branchPodState(pod({ phase: "Running" }, true)).state).toBe("stopped");
  });
});
