import type { V1PodTemplateSpec } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { TARGET_ENV_PREFIX, TARGET_ROOT } from "../../../proto/sidecar-target.js";
import {
  AGENT_CONTAINER,
  canonicalJson,
  injectSidecar,
  stripSidecar,
  templateHash,
} from "./sidecar-pod-template.js";
import { agentTargetView, prefixReferences } from "./sidecar-target-view.js";

const HASH = "ef".repeat(32);
const P = TARGET_ENV_PREFIX;

function template(): V1PodTemplateSpec {
  return {
    metadata: { labels: { app: "shop" } },
    spec: {
      containers: [
        {
          name: "app",
          image: "shop:1",
          ports: [{ containerPort: 8080, name: "http" }],
          envFrom: [
            { configMapRef: { name: "app-config" } },
            { prefix: "DB_", secretRef: { name: "db", optional: true } },
          ],
          env: [
            { name: "LOG_LEVEL", value: "info" },
            {
              name: "GREETING",
              value: "level=$(LOG_LEVEL) cart=$(CART_SERVICE_HOST) $$(LOG_LEVEL) $(DB_url)",
            },
            { name: "PASSWORD", valueFrom: { secretKeyRef: { name: "db", key: "password" } } },
            { name: "CPU", valueFrom: { resourceFieldRef: { resource: "limits.cpu", divisor: "1m" } } },
            {
              name: "SIDE_MEM",
              valueFrom: { resourceFieldRef: { containerName: "metrics", resource: "limits.memory" } },
            },
            { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
          ],
          volumeMounts: [
            { name: "config", mountPath: "/etc/shop" },
            { name: "config", mountPath: "/app/settings.yaml", subPath: "settings.yaml" },
            { name: "logs", mountPath: "/var/log/shop", subPathExpr: "$(POD_NAME)" },
            { name: "token", mountPath: "/var/run/secrets/tokens" },
            { name: "bundle", mountPath: "/etc/bundle/" },
          ],
        },
        { name: "metrics", image: "exporter:1" },
      ],
      volumes: [
        { name: "config", configMap: { name: "app-config" } },
        { name: "logs", emptyDir: {} },
        {
          name: "token",
          projected: {
            sources: [
              { serviceAccountToken: { path: "token", audience: "vault" } },
              { configMap: { name: "ca" } },
            ],
          },
        },
        { name: "bundle", projected: { sources: [{ secret: { name: "db" } }] } },
      ],
    },
  };
}

describe("prefixReferences", () => {
  it("points $(VAR) at the copies, keeps service-link names, $$ escapes and incomplete references", () => {
    const none = new Set<string>();
    expect(prefixReferences("a=$(A) b=$(B_SERVICE_HOST) c=$(C_PORT_80_TCP_ADDR)", none)).toBe(
      `a=$(${P}A) b=$(B_SERVICE_HOST) c=$(C_PORT_80_TCP_ADDR)`,
    );
    expect(prefixReferences("$$(A) $$$(A) $ $x $() $(A", none)).toBe(`$$(A) $$$(${P}A) $ $x $() $(A`);
    expect(prefixReferences("trailing $", none)).toBe("trailing $");
  });

  it("points a service-link name at the copy when the container defines that name itself", () => {
    expect(prefixReferences("$(CART_SERVICE_HOST)", new Set(["CART_SERVICE_HOST"]))).toBe(
      `$(${P}CART_SERVICE_HOST)`,
    );
  });
});

describe("agentTargetView", () => {
  it("copies envFrom with the prefix in front of the original one", () => {
    expect(agentTargetView(template().spec!, "app").envFrom).toEqual([
      { configMapRef: { name: "app-config" }, prefix: P },
      { prefix: `${P}DB_`, secretRef: { name: "db", optional: true } },
    ]);
  });

  it("copies env under the prefix, references rewritten, resourceFieldRef pinned to the target", () => {
    const env = agentTargetView(template().spec!, "app").env;
    expect(env).toEqual([
      { name: `${P}LOG_LEVEL`, value: "info" },
      {
        name: `${P}GREETING`,
        value: `level=$(${P}LOG_LEVEL) cart=$(CART_SERVICE_HOST) $$(LOG_LEVEL) $(${P}DB_url)`,
      },
      { name: `${P}PASSWORD`, valueFrom: { secretKeyRef: { name: "db", key: "password" } } },
      {
        name: `${P}CPU`,
        valueFrom: { resourceFieldRef: { containerName: "app", resource: "limits.cpu", divisor: "1m" } },
      },
      {
        name: `${P}SIDE_MEM`,
        valueFrom: { resourceFieldRef: { containerName: "metrics", resource: "limits.memory" } },
      },
      { name: `${P}POD_NAME`, valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
    ]);
  });

  it("mounts the target's volumes read-only below the root, without ServiceAccount tokens", () => {
    const view = agentTargetView(template().spec!, "app");
    expect(view.volumeMounts).toEqual([
      { name: "config", mountPath: `${TARGET_ROOT}/etc/shop`, readOnly: true },
      {
        name: "config",
        mountPath: `${TARGET_ROOT}/app/settings.yaml`,
        readOnly: true,
        subPath: "settings.yaml",
      },
      // subPathExpr is expanded against the agent's env: pointed at the copy.
      {
        name: "logs",
        mountPath: `${TARGET_ROOT}/var/log/shop`,
        readOnly: true,
        subPathExpr: `$(${P}POD_NAME)`,
      },
      { name: "bundle", mountPath: `${TARGET_ROOT}/etc/bundle`, readOnly: true },
    ]);
    expect(view.args).toEqual([
      `--target-env-prefix=${P}`,
      `--target-root=${TARGET_ROOT}`,
      "--target-mount=/etc/shop",
      "--target-mount=/app/settings.yaml",
      "--target-mount=/var/log/shop",
      "--target-mount=/etc/bundle/",
    ]);
  });
});

describe("injectSidecar with the target's env and volumes", () => {
  it("puts the copies before the agent's own env, adds the mounts and leaves the app untouched", () => {
    const original = template();
    const patched = injectSidecar(original, "app", HASH, { agentImage: "a:1", redirectImage: "r:1" });
    expect(patched.spec!.containers[0]).toEqual(original.spec!.containers[0]);
    const agent = patched.spec!.initContainers!.find((c) => c.name === AGENT_CONTAINER)!;
    expect(agent.envFrom).toHaveLength(2);
    expect(agent.env!.map((e) => e.name)).toEqual([
      ...original.spec!.containers[0]!.env!.map((e) => P + e.name),
      "POD_NAMESPACE",
      "POD_NAME",
    ]);
    expect(agent.volumeMounts!.map((m) => m.mountPath)).toContain(`${TARGET_ROOT}/etc/shop`);
    expect(agent.args).toContain(`--target-root=${TARGET_ROOT}`);
    // No new pod volume but the agent's own state.
    expect(patched.spec!.volumes).toEqual([
      ...original.spec!.volumes!,
      { name: "switchyard-agent-state", emptyDir: { sizeLimit: "1Mi" } },
    ]);
  });

  it("keeps the TLS mount next to the target's mounts", () => {
    const patched = injectSidecar(template(), "app", HASH, {
      agentImage: "a:1",
      redirectImage: "r:1",
      agentTlsSecret: "agent-tls",
    });
    const agent = patched.spec!.initContainers!.find((c) => c.name === AGENT_CONTAINER)!;
    expect(agent.volumeMounts!.map((m) => m.name)).toEqual([
      "switchyard-agent-state",
      "switchyard-agent-tls",
      "config",
      "config",
      "logs",
      "bundle",
    ]);
    // Every target mount and the TLS Secret are read-only; only the agent's own state is not.
    expect(agent.volumeMounts!.filter((m) => !m.readOnly).map((m) => m.name)).toEqual([
      "switchyard-agent-state",
    ]);
  });

  it("stripSidecar undoes it exactly", () => {
    for (const agentTlsSecret of [undefined, "agent-tls"]) {
      const original = template();
      const patched = injectSidecar(original, "app", HASH, {
        agentImage: "a:1",
        redirectImage: "r:1",
        ...(agentTlsSecret ? { agentTlsSecret } : {}),
      });
      expect(canonicalJson(stripSidecar(patched))).toBe(canonicalJson(original));
      expect(templateHash(stripSidecar(patched))).toBe(templateHash(original));
    }
  });
});
