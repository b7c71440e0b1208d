import { describe, expect, it } from "vitest";
import { SERVICE_LINK_NAME } from "../../../../proto/sidecar-target.js";
import { filterEnv } from "./env-resolver.js";
import { PodEnv } from "./pod-env.js";
import { PodFiles } from "./pod-files.js";
import { TargetView } from "./target-view.js";

const P = "SWITCHYARD_TARGET_ENV_";

describe("service-link names", () => {
  it("match the kubelet's service-link variables and nothing else", () => {
    for (const name of [
      "KUBERNETES_SERVICE_HOST",
      "KUBERNETES_SERVICE_PORT",
      "KUBERNETES_SERVICE_PORT_HTTPS",
      "KUBERNETES_PORT",
      "KUBERNETES_PORT_443_TCP",
      "KUBERNETES_PORT_443_TCP_PROTO",
      "KUBERNETES_PORT_443_TCP_PORT",
      "KUBERNETES_PORT_443_TCP_ADDR",
      "CART_API_PORT_9000_UDP",
      "DNS_PORT_53_SCTP_ADDR",
      "CART_API_SERVICE_PORT_GRPC_X",
    ])
      expect(SERVICE_LINK_NAME.test(name), name).toBe(true);
    for (const name of [
      "PORT",
      "_PORT_X",
      "HOME",
      "POD_NAME",
      "APP_PORT_8080",
      "APP_PORT_80_HTTP",
      "APP_PORT_80_TCP_HOST",
      "cart_SERVICE_HOST",
      "SERVICE_HOST",
      "DATABASE_URL",
    ])
      expect(SERVICE_LINK_NAME.test(name), name).toBe(false);
  });
});

describe("PodEnv", () => {
  it("answers the service links and the prefixed variables, stripped, which win", () => {
    const env = new PodEnv(P, {
      HOME: "/home/agent",
      POD_NAME: "agent-sees-this",
      SWITCHYARD_AGENT_LISTEN: "0.0.0.0:9440",
      SWITCHYARD_AGENT_APP_PORT: "8080",
      KUBERNETES_SERVICE_HOST: "10.0.0.1",
      CART_SERVICE_HOST: "10.0.0.7",
      [`${P}POD_NAME`]: "shop-0",
      [`${P}CART_SERVICE_HOST`]: "overridden",
      [`${P}feature.flags`]: "a,b",
      [`${P}DB_url`]: "postgres://db/shop",
      [P]: "no name",
      UNSET: undefined,
    }).env();
    expect(Object.fromEntries(env)).toEqual({
      KUBERNETES_SERVICE_HOST: "10.0.0.1",
      CART_SERVICE_HOST: "overridden",
      POD_NAME: "shop-0",
      "feature.flags": "a,b",
      DB_url: "postgres://db/shop",
    });
  });

  it("gives an unresolved reference back the name the app's value has", () => {
    const env = new PodEnv(P, { [`${P}GREETING`]: `hi $(${P}MISSING) $(OTHER) (${P}X)` }).env();
    expect(env.get("GREETING")).toBe(`hi $(MISSING) $(OTHER) (${P}X)`);
  });

  it("reads the environment on every call", () => {
    const environment: Record<string, string> = { [`${P}A`]: "1" };
    const pod = new PodEnv(P, environment);
    expect(pod.env().get("A")).toBe("1");
    environment[`${P}A`] = "2";
    expect(pod.env().get("A")).toBe("2");
  });

  it("refuses a prefix that cannot start a variable name, naming the flag", () => {
    for (const prefix of ["", "1X_", "A-B_", "A B"])
      expect(() => new PodEnv(prefix, {})).toThrow(/--target-env-prefix/);
  });

  it("serves a TargetView's env with no API sources, and filters as before", async () => {
    const view = new TargetView(undefined, { namespace: "shop", name: "shop-0" }, undefined, {
      env: new PodEnv(P, { [`${P}A_1`]: "x", [`${P}B`]: "y" }),
      files: new PodFiles("/nonexistent-root", []),
    });
    expect(Object.fromEntries(filterEnv(await view.env(), ["A_*"]))).toEqual({ A_1: "x" });
  });
});
