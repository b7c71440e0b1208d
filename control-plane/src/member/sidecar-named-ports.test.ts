// Ports a Service reaches by name are taken by name (no redirect, no privilege), and given back.
import type { V1PodTemplateSpec } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  AGENT_CONTAINER,
  injectSidecar,
  needsRedirect,
  REDIRECT_CONTAINER,
  stripSidecar,
} from "./sidecar-pod-template.js";

const HASH = "ef".repeat(32);
const settings = { agentImage: "agent:1", redirectImage: "iptables:1" };
const template = (): V1PodTemplateSpec => ({
  metadata: { labels: { app: "web" } },
  spec: {
    containers: [
      {
        name: "app",
        image: "web:1",
        ports: [
          { name: "http", containerPort: 8080 },
          { name: "admin", containerPort: 9000 },
        ],
        readinessProbe: { httpGet: { path: "/", port: "http" } },
      },
    ],
  },
});

describe("named targetPorts", () => {
  it("takes every port by name when the Services name them all: no init container", () => {
    const named = new Set(["http", "admin"]);
    expect(needsRedirect(template(), "app", named)).toBe(false);
    const t = injectSidecar(template(), "app", HASH, settings, named);
    expect(t.spec!.initContainers!.map((c) => c.name)).toEqual([AGENT_CONTAINER]); // no redirect
    const agent = t.spec!.initContainers!.find((c) => c.name === AGENT_CONTAINER)!;
    expect(agent.ports).toEqual([
      { name: "sy-agent", containerPort: 9440, protocol: "TCP" },
      { name: "http", containerPort: 15100, protocol: "TCP" },
      { name: "admin", containerPort: 15101, protocol: "TCP" },
    ]);
    expect(agent.args).toEqual(expect.arrayContaining(["--app-port=8080:15100", "--app-port=9000:15101"]));
    expect(t.spec!.containers[0]!.ports).toEqual([{ containerPort: 8080 }, { containerPort: 9000 }]);
    expect(stripSidecar(t)).toEqual(template());
  });

  it("redirects only the ports no Service reaches by name", () => {
    const named = new Set(["http"]);
    expect(needsRedirect(template(), "app", named)).toBe(true);
    const t = injectSidecar(template(), "app", HASH, settings, named);
    const script = t.spec!.initContainers!.find((c) => c.name === REDIRECT_CONTAINER)!.command![2]!;
    expect(script).toContain("--dport 9000 ");
    expect(script).not.toContain("--dport 8080 ");
    expect(t.spec!.containers[0]!.ports).toEqual([
      { containerPort: 8080 },
      { name: "admin", containerPort: 9000 },
    ]);
    expect(stripSidecar(t)).toEqual(template());
  });

  it("names that are not the target container's ports change nothing", () => {
    expect(needsRedirect(template(), "app", new Set(["grpc"]))).toBe(true);
    expect(injectSidecar(template(), "app", HASH, settings, new Set(["grpc"]))).toEqual(
      injectSidecar(template(), "app", HASH, settings),
    );
  });
});
