// The owner a pod is born under and the patch that gives it the agent (pure).
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { BORN_WITH_AGENT_ANNOTATION } from "../member/agent-annotations.js";
import { AGENT_CONTAINER, SECRET_HASH_ANNOTATION } from "../member/sidecar-pod-template.js";
import { podInjectionPatch, podOwner } from "./pod-injection.js";

const HASH = "ab".repeat(32);
const settings = { agentImage: "agent:1", redirectImage: "iptables:1" };
const pod = (owner?: { kind: string; name: string }, hash = "5d8f9c7b4"): V1Pod => ({
  metadata: {
    labels: { app: "web", "pod-template-hash": hash },
    ...(owner ? { ownerReferences: [{ apiVersion: "apps/v1", controller: true, uid: "u", ...owner }] } : {}),
  },
  spec: { containers: [{ name: "app", image: "web:1", ports: [{ name: "http", containerPort: 8080 }] }] },
});

describe("podOwner", () => {
  it("strips the pod-template-hash from a ReplicaSet's name", () => {
    expect(podOwner(pod({ kind: "ReplicaSet", name: "web-api-5d8f9c7b4" }))).toEqual({
      kind: "deployment",
      name: "web-api",
    });
  });
  it("takes a StatefulSet as it is", () => {
    expect(podOwner(pod({ kind: "StatefulSet", name: "db" }))).toEqual({ kind: "statefulset", name: "db" });
  });
  it("knows no owner for a bare pod, a Job's or a ReplicaSet not named for the hash", () => {
    expect(podOwner(pod())).toBeUndefined();
    expect(podOwner(pod({ kind: "Job", name: "x" }))).toBeUndefined();
    expect(podOwner(pod({ kind: "ReplicaSet", name: "standalone" }))).toBeUndefined();
  });
});

describe("podInjectionPatch", () => {
  it("gives the pod the agent, its secret hash and the born-with-agent mark", () => {
    const now = new Date("2026-01-01T00:00:00Z");
    const patch = podInjectionPatch(pod(), "app", HASH, settings, new Set(["http"]), now)!;
    const spec = patch.find((p) => p.path === "/spec")!.value as V1Pod["spec"];
    expect(spec!.initContainers!.map((c) => c.name)).toEqual([AGENT_CONTAINER]);
    const annotations = patch.find((p) => p.path === "/metadata/annotations")!;
    expect(annotations.op).toBe("add");
    expect(annotations.value).toMatchObject({
      [SECRET_HASH_ANNOTATION]: HASH,
      [BORN_WITH_AGENT_ANNOTATION]: now.toISOString(),
    });
  });
  it("leaves a pod that already carries the agent alone", () => {
    const first = podInjectionPatch(pod(), "app", HASH, settings, new Set(), new Date())!;
    const carried = { ...pod(), spec: first[0]!.value as V1Pod["spec"] };
    expect(podInjectionPatch(carried, "app", HASH, settings, new Set(), new Date())).toBeUndefined();
  });
});
