import type { V1PodTemplateSpec } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  AGENT_CONTAINER,
  AGENT_STATE_MOUNT,
  AGENT_STATE_VOLUME,
  canonicalJson,
  hasSidecar,
  injectSidecar,
  portMappings,
  REDIRECT_CONTAINER,
  redirectScript,
  SECRET_HASH_ANNOTATION,
  sidecarSecretHash,
  stripSidecar,
  templateHash,
} from "./sidecar-pod-template.js";
import { PROBE_PORTS_ANNOTATION } from "./sidecar-probes.js";

const HASH = "cd".repeat(32);

function template(): V1PodTemplateSpec {
  return {
    metadata: { labels: { app: "web" } },
    spec: {
      containers: [
        {
          name: "app",
          image: "web:1",
          ports: [
            { containerPort: 8080, protocol: "TCP" },
            { containerPort: 8081 },
            { containerPort: 5353, protocol: "UDP" },
          ],
        },
        { name: "metrics", image: "exporter:1", ports: [{ containerPort: 15100 }] },
      ],
    },
  };
}

describe("sidecar pod template", () => {
  it("maps the target container's TCP ports to free agent ports, skipping ports in use", () => {
    expect(portMappings(template().spec!, "app")).toEqual([
      { appPort: 8080, listenPort: 15101 },
      { appPort: 8081, listenPort: 15102 },
    ]);
    expect(portMappings(template().spec!, "metrics")).toEqual([{ appPort: 15100, listenPort: 15101 }]);
  });

  it("adds the agent and the redirect init container without touching the app", () => {
    const original = template();
    const before = canonicalJson(original);
    const patched = injectSidecar(original, "app", HASH, {
      agentImage: "switchyard/agent:1",
      redirectImage: "switchyard/iptables:1",
    });
    expect(canonicalJson(original)).toBe(before); // input not mutated
    expect(patched.spec!.containers[0]).toEqual(original.spec!.containers[0]);
    const agent = patched.spec!.initContainers!.find((c) => c.name === AGENT_CONTAINER)!;
    expect(agent.command).toEqual(["node"]);
    expect(agent.args).toEqual([
      "dist/data-plane/agent/src/main.js",
      "--listen=0.0.0.0:9440",
      "--container=app",
      `--secret-hash=${HASH}`,
      "--app-port=8080:15101",
      "--app-port=8081:15102",
      "--target-env-prefix=SWITCHYARD_TARGET_ENV_",
      "--target-root=/var/run/switchyard/target",
      "--state-file=/var/run/switchyard/agent-state/subscriptions.json",
    ]);
    const init = patched.spec!.initContainers!.find((c) => c.name === REDIRECT_CONTAINER)!;
    expect(init.image).toBe("switchyard/iptables:1");
    expect(init.command![2]).toContain("--dport 8080 -j REDIRECT --to-ports 15101");
    expect(init.securityContext).toEqual({
      runAsUser: 0,
      runAsNonRoot: false,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"], add: ["NET_ADMIN", "NET_RAW"] },
    });
    // A native sidecar after the redirect: started (and probed) before the app, stopped after it.
    expect(patched.spec!.initContainers!.map((c) => c.name)).toEqual([REDIRECT_CONTAINER, AGENT_CONTAINER]);
    expect(agent.restartPolicy).toBe("Always");
    expect(agent.startupProbe?.tcpSocket?.port).toBe(9440); // no readiness probe through the agent
    expect(patched.spec!.containers.map((c) => c.name)).toEqual(original.spec!.containers.map((c) => c.name));
    expect(hasSidecar(patched.spec)).toBe(true);
    expect(sidecarSecretHash(patched)).toBe(HASH);
    expect(patched.metadata!.annotations![SECRET_HASH_ANNOTATION]).toBe(HASH);
  });

  it("runs the agent without privilege: non-root, read-only root, no capabilities, RuntimeDefault seccomp", () => {
    const patched = injectSidecar(template(), "app", HASH, {
      agentImage: "a:1",
      redirectImage: "r:1",
      agentTlsSecret: "agent-tls",
    });
    const agent = patched.spec!.initContainers!.find((c) => c.name === AGENT_CONTAINER)!;
    expect(agent.securityContext).toEqual({
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
    // It writes nothing but its subscriptions, to its own emptyDir; the TLS Secret is read-only.
    expect(agent.volumeMounts).toEqual([
      { name: AGENT_STATE_VOLUME, mountPath: AGENT_STATE_MOUNT },
      expect.objectContaining({ readOnly: true }),
    ]);
    expect(patched.spec!.volumes).toContainEqual({
      name: AGENT_STATE_VOLUME,
      emptyDir: { sizeLimit: "1Mi" },
    });
    // Each template gets its own object (a shared one would leak edits between templates).
    const other = injectSidecar(template(), "app", HASH, { agentImage: "a:1", redirectImage: "r:1" });
    expect(other.spec!.initContainers!.find((c) => c.name === AGENT_CONTAINER)!.securityContext).not.toBe(
      agent.securityContext,
    );
  });

  it("stripSidecar undoes injectSidecar exactly", () => {
    const original = template();
    const patched = injectSidecar(original, "app", HASH, { agentImage: "a:1", redirectImage: "r:1" });
    expect(canonicalJson(stripSidecar(patched))).toBe(canonicalJson(original));
    expect(templateHash(stripSidecar(patched))).toBe(templateHash(original));
  });

  it("points the app's probes on taken ports at agent relays, and strip puts them back", () => {
    const original = template();
    const app = original.spec!.containers[0]!;
    app.ports![0]!.name = "http";
    app.readinessProbe = { httpGet: { path: "/healthz", port: 8080 }, periodSeconds: 1 };
    app.livenessProbe = { tcpSocket: { port: "http" } };
    app.startupProbe = { grpc: { port: 8081 } };
    const elsewhere = { httpGet: { host: "10.0.0.9", path: "/", port: 8080 } };
    original.spec!.containers[1]!.readinessProbe = { httpGet: { path: "/", port: 15100 } };
    const patched = injectSidecar(
      original,
      "app",
      HASH,
      { agentImage: "a:1", redirectImage: "r:1" },
      new Set(["http"]),
    );
    const probed = patched.spec!.containers[0]!;
    // 8080 is taken by name, 8081 redirected: both relayed, each once, after the traffic ports.
    expect(probed.readinessProbe!.httpGet!.port).toBe(15103);
    expect(probed.livenessProbe!.tcpSocket!.port).toBe(15103); // the name no longer resolves in the app
    expect(probed.startupProbe!.grpc!.port).toBe(15104);
    expect(patched.spec!.containers[1]!.readinessProbe!.httpGet!.port).toBe(15100); // not the target
    const agent = patched.spec!.initContainers!.find((c) => c.name === AGENT_CONTAINER)!;
    expect(agent.args!.filter((a) => a.startsWith("--probe-port="))).toEqual([
      "--probe-port=8080:15103",
      "--probe-port=8081:15104",
    ]);
    // The readiness probe passes through the agent, listened last: no startup probe holds the app.
    expect(agent.startupProbe).toBeUndefined();
    expect(JSON.parse(patched.metadata!.annotations![PROBE_PORTS_ANNOTATION]!)).toEqual({
      readinessProbe: 8080,
      livenessProbe: "http",
      startupProbe: 8081,
    });
    expect(canonicalJson(stripSidecar(patched))).toBe(canonicalJson(original));
    // A probe aimed at another host is not the pod's: left alone.
    app.readinessProbe = elsewhere;
    app.livenessProbe = undefined;
    app.startupProbe = undefined;
    const untouched = injectSidecar(
      original,
      "app",
      HASH,
      { agentImage: "a:1", redirectImage: "r:1" },
      new Set(["http"]),
    );
    expect(untouched.spec!.containers[0]!.readinessProbe).toEqual(elsewhere);
    expect(untouched.metadata!.annotations![PROBE_PORTS_ANNOTATION]).toBeUndefined();
  });

  it("adds no redirect when the container has no TCP ports", () => {
    const t: V1PodTemplateSpec = { spec: { containers: [{ name: "worker", image: "w:1" }] } };
    const patched = injectSidecar(t, "worker", HASH, { agentImage: "a:1", redirectImage: "r:1" });
    expect(patched.spec!.initContainers!.map((c) => c.name)).toEqual([AGENT_CONTAINER]); // no redirect
    expect(redirectScript([])).not.toContain("REDIRECT");
  });

  it("hashes templates independently of key order", () => {
    expect(templateHash({ metadata: { labels: { a: "1", b: "2" } } })).toBe(
      templateHash({ metadata: { labels: { b: "2", a: "1" } } }),
    );
  });
});
