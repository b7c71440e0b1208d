// The agent's TLS Secret in the pod template, and the JSON patch the provisioner writes.
import type { V1Deployment, V1PodTemplateSpec } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { workloadPatch } from "./sidecar-agent-provisioner.js";
import {
  AGENT_CONTAINER,
  AGENT_STATE_MOUNT,
  AGENT_STATE_VOLUME,
  AGENT_TLS_MOUNT,
  AGENT_TLS_VOLUME,
  injectSidecar,
  needsRedirect,
  stripSidecar,
} from "./sidecar-pod-template.js";

const HASH = "ab".repeat(32);
const base = (): V1PodTemplateSpec => ({
  metadata: { labels: { app: "web" } },
  spec: {
    containers: [{ name: "app", image: "web:1", ports: [{ containerPort: 8080 }] }],
    volumes: [{ name: "data", emptyDir: {} }],
  },
});
const settings = { agentImage: "agent:1", redirectImage: "iptables:1" };

describe("agent TLS in the sidecar", () => {
  it("mounts the Secret read-only and serves wss:// with it; strip removes exactly that", () => {
    const t = injectSidecar(base(), "app", HASH, { ...settings, agentTlsSecret: "agent-tls" });
    const agent = t.spec!.initContainers!.find((c) => c.name === AGENT_CONTAINER)!;
    expect(agent.args).toEqual(
      expect.arrayContaining([
        `--tls-cert=${AGENT_TLS_MOUNT}/tls.crt`,
        `--tls-key=${AGENT_TLS_MOUNT}/tls.key`,
      ]),
    );
    expect(agent.volumeMounts).toEqual([
      { name: AGENT_STATE_VOLUME, mountPath: AGENT_STATE_MOUNT },
      { name: AGENT_TLS_VOLUME, mountPath: AGENT_TLS_MOUNT, readOnly: true },
    ]);
    expect(t.spec!.volumes).toEqual([
      { name: "data", emptyDir: {} },
      { name: AGENT_STATE_VOLUME, emptyDir: { sizeLimit: "1Mi" } },
      { name: AGENT_TLS_VOLUME, secret: { secretName: "agent-tls" } },
    ]);
    expect(stripSidecar(t)).toEqual(base());
  });

  it("without a Secret the agent serves plaintext and the pod gets only the agent's state volume", () => {
    const t = injectSidecar(base(), "app", HASH, settings);
    const agent = t.spec!.initContainers!.find((c) => c.name === AGENT_CONTAINER)!;
    expect(agent.args!.some((a) => a.startsWith("--tls-"))).toBe(false);
    expect(agent.volumeMounts).toEqual([{ name: AGENT_STATE_VOLUME, mountPath: AGENT_STATE_MOUNT }]);
    expect(t.spec!.volumes).toEqual([
      { name: "data", emptyDir: {} },
      { name: AGENT_STATE_VOLUME, emptyDir: { sizeLimit: "1Mi" } },
    ]);
    expect(stripSidecar(t)).toEqual(base());
  });

  it("needs the redirect only for a container with TCP ports", () => {
    expect(needsRedirect(base(), "app")).toBe(true);
    expect(needsRedirect({ spec: { containers: [{ name: "app" }] } }, "app")).toBe(false);
  });
});

describe("workloadPatch", () => {
  const workload = (annotations?: Record<string, string>): V1Deployment => ({
    metadata: {
      name: "web",
      namespace: "ns",
      resourceVersion: "42",
      ...(annotations ? { annotations } : {}),
    },
  });

  it("carries the resourceVersion read, replaces the template whole and escapes annotation keys", () => {
    const ops = workloadPatch(workload({ "deployment.kubernetes.io/revision": "1" }), base(), {
      "switchyard.dev/original-pod-template": "{}",
      "switchyard.dev/gone": undefined,
    });
    expect(ops).toEqual([
      { op: "replace", path: "/metadata/resourceVersion", value: "42" },
      { op: "add", path: "/metadata/annotations/switchyard.dev~1original-pod-template", value: "{}" },
      { op: "replace", path: "/spec/template", value: base() },
    ]);
  });

  it("creates the annotations map when the workload has none, and removes only keys present", () => {
    expect(workloadPatch(workload(), base(), { "a/b": "1" })[1]).toEqual({
      op: "add",
      path: "/metadata/annotations",
      value: { "a/b": "1" },
    });
    expect(
      workloadPatch(workload({ "a/b": "1", "c~d": "2" }), base(), { "a/b": undefined, "c~d": undefined }),
    ).toEqual([
      { op: "replace", path: "/metadata/resourceVersion", value: "42" },
      { op: "remove", path: "/metadata/annotations/a~1b" },
      { op: "remove", path: "/metadata/annotations/c~0d" },
      { op: "replace", path: "/spec/template", value: base() },
    ]);
  });
});
