import { writeFileSync } from "node:fs";
import { testScratchDir } from "../../test/support/scratch-dir.js";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { OptionError } from "../../lib/option-error.js";
import { HelpRequested, parseControlPlaneArgs } from "./control-plane-options.js";

const base = [
  "--namespace",
  "switchyard",
  "--grpc-plaintext",
  "--router-service-account",
  "switchyard/router",
];

describe("parseControlPlaneArgs", () => {
  it("answers --help (the image's default CMD) with the usage, not an option error", () => {
    let thrown: unknown;
    try {
      parseControlPlaneArgs(["--help"]);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(HelpRequested);
    expect((thrown as HelpRequested).text).toMatch(/--mode <mode>[\s\S]*--redirect-image <image>/);
  });

  it("parses a primary with defaults", () => {
    const o = parseControlPlaneArgs(["--mode", "primary", ...base], {});
    expect(o.mode).toBe("primary");
    expect(o.grpcListen).toEqual({ host: "0.0.0.0", port: 9443 });
    expect(o.metricsListen).toEqual({ host: "0.0.0.0", port: 9090 });
    expect(o.routerServiceAccounts).toEqual([{ namespace: "switchyard", name: "router" }]);
    expect(o.leaseDurationMs).toBe(15_000);
    expect(o.primary.configMap).toBe("switchyard-clusters");
    expect(o.maxConnectionAgeMs).toBe(30 * 60_000);
  });

  it("parses the session allow-list, the same on a Primary and a member", () => {
    for (const mode of [
      ["--mode", "primary"],
      ["--mode", "member", "--router-endpoint", "ws://gw:1"],
    ]) {
      const o = parseControlPlaneArgs(
        [
          ...mode,
          ...base,
          "--allowed-namespaces",
          "shop,team-a",
          "--allowed-target-kinds",
          "deployment",
          "--allowed-targets",
          "shop/deployment/web,team-*/*/api-*",
        ],
        {},
      );
      expect(o.allowedNamespaces).toEqual(["shop", "team-a"]);
      expect(o.allowedTargetKinds).toEqual(["deployment"]);
      expect(o.allowedTargets).toEqual(["shop/deployment/web", "team-*/*/api-*"]);
    }
    expect(parseControlPlaneArgs(["--mode", "primary", ...base], {}).allowedTargets).toEqual([]);
  });

  it("takes how long idle agents linger (default 15 minutes, 0 at once, -1 until removed) and refuses the rest", () => {
    const at = (v?: string) =>
      parseControlPlaneArgs(
        ["--mode", "primary", ...base, ...(v === undefined ? [] : ["--agent-linger-seconds", v])],
        {},
      ).agents.lingerSeconds;
    expect(at()).toBe(900);
    expect(at("0")).toBe(0);
    expect(at("-1")).toBe(-1);
    expect(at("2592000")).toBe(2_592_000);
    for (const bad of ["-2", "1.5", "soon", "2592001"]) {
      expect(() => at(bad), bad).toThrow(OptionError);
      expect(() => at(bad), bad).toThrow(/--agent-linger-seconds.*from -1 \(until removed\)/);
    }
  });

  it("runs the admission webhook only where pods get sidecars, and only over TLS", () => {
    expect(() =>
      parseControlPlaneArgs(["--mode", "primary", ...base, "--injection-listen", ":9444"], {}),
    ).toThrow(/--injection-listen.*member or both mode/);
    expect(() =>
      parseControlPlaneArgs(
        ["--mode", "member", ...base, "--router-endpoint", "wss://gw:8443", "--injection-listen", ":9444"],
        {},
      ),
    ).toThrow(/--injection-listen.*HTTPS only: give --tls-cert and --tls-key/);
  });

  it("takes the RouteDiscovery connection age in seconds", () => {
    const o = parseControlPlaneArgs(
      ["--mode", "primary", ...base, "--max-connection-age-seconds", "1.5"],
      {},
    );
    expect(o.maxConnectionAgeMs).toBe(1500);
  });

  it("reads TLS files and the namespace from POD_NAMESPACE", () => {
    const dir = testScratchDir("cp-opts-");
    writeFileSync(join(dir, "c.pem"), "CERT");
    writeFileSync(join(dir, "k.pem"), "KEY");
    const o = parseControlPlaneArgs(
      [
        "--mode",
        "primary",
        "--tls-cert",
        join(dir, "c.pem"),
        "--tls-key",
        join(dir, "k.pem"),
        "--router-service-account",
        "a/b",
      ],
      { POD_NAMESPACE: "sy", POD_NAME: "cp-0" },
    );
    expect(o.tls).toEqual({
      certPem: "CERT",
      keyPem: "KEY",
      certFile: join(dir, "c.pem"),
      keyFile: join(dir, "k.pem"),
    });
    expect(o.namespace).toBe("sy");
    expect(o.identity).toBe("cp-0");
  });

  it("takes the agents' TLS Secret and the CAs routing tables carry for agents and gateways", () => {
    const dir = testScratchDir("cp-opts-");
    writeFileSync(join(dir, "ca.crt"), "CA");
    const o = parseControlPlaneArgs(
      [
        "--mode",
        "both",
        ...base,
        "--router-endpoint",
        "wss://routers:8443",
        "--agent-tls-secret",
        "switchyard-agent-tls",
        "--agent-ca",
        join(dir, "ca.crt"),
        "--gateway-ca",
        join(dir, "ca.crt"),
      ],
      {},
    );
    expect(o).toMatchObject({
      agents: { tlsSecret: "switchyard-agent-tls", tlsServerName: "switchyard-agent", caPem: "CA" },
      primary: { gatewayCaPem: "CA" },
    });
    // Plaintext stays the default (the embedded environment).
    const plain = parseControlPlaneArgs(["--mode", "both", ...base, "--router-endpoint", "ws://x:1"], {});
    expect(plain).toMatchObject({
      agents: { tlsSecret: undefined, tlsServerName: undefined, caPem: undefined },
      primary: { gatewayCaPem: undefined },
    });
  });

  it("takes the DNS name agent certificates carry (default switchyard-agent with --agent-tls-secret)", () => {
    const argv = ["--mode", "member", ...base, "--router-endpoint", "ws://x:1", "--agent-tls-secret", "t"];
    expect(parseControlPlaneArgs(argv, {}).agents.tlsServerName).toBe("switchyard-agent");
    const named = parseControlPlaneArgs([...argv, "--agent-tls-server-name", "agent.shop.svc"], {});
    expect(named.agents.tlsServerName).toBe("agent.shop.svc");
  });

  const member = ["--mode", "member", ...base, "--router-endpoint", "ws://x:1"];
  it.each([
    [[...member, "--agent-tls-secret", "Not_A_Name"], "--agent-tls-secret"],
    [
      [...member, "--agent-provisioner", "process", "--agent-kubeconfig", "k", "--agent-tls-secret", "t"],
      "--agent-tls-secret",
    ],
    [[...member, "--agent-ca", "/dev/null"], "--agent-ca"],
    [[...member, "--agent-tls-server-name", "switchyard-agent"], "--agent-tls-server-name"],
    [[...member, "--agent-tls-secret", "t", "--agent-tls-server-name", "Agent_1"], "--agent-tls-server-name"],
    [
      [...member, "--agent-tls-secret", "t", "--agent-tls-server-name", "10.0.0.7"],
      "--agent-tls-server-name",
    ],
    [[...member, "--agent-tls-secret", "t", "--agent-tls-server-name", "a..b"], "--agent-tls-server-name"],
    [[...member, "--agent-tls-secret", "t", "--agent-ca", "/nonexistent"], "--agent-ca"],
    [[...member, "--gateway-ca", "/dev/null"], "--gateway-ca"],
    [["--mode", "primary", ...base, "--gateway-ca", "/nonexistent"], "--gateway-ca"],
  ])("refuses TLS flags %j naming %s", (argv, flag) => {
    expect(() => parseControlPlaneArgs(argv, {})).toThrow(
      expect.objectContaining({ option: flag, code: "SWITCHYARD_INVALID_OPTION" }) as Error,
    );
  });

  it.each([
    [["--mode", "primary", "--router-service-account", "a/b", "--grpc-plaintext"], "--namespace"],
    [["--mode", "sideways", ...base], "arguments"],
    [["--mode", "primary", "--namespace", "sy", "--router-service-account", "a/b"], "--tls-cert"],
    [["--mode", "primary", "--namespace", "sy", "--grpc-plaintext"], "--router-service-account"],
    [["--mode", "primary", ...base, "--router-service-account", "no-slash"], "--router-service-account"],
    [["--mode", "member", ...base], "--router-endpoint"],
    [["--mode", "member", ...base, "--router-endpoint", "http://x"], "--router-endpoint"],
    [
      ["--mode", "member", ...base, "--router-endpoint", "ws://x:1", "--agent-provisioner", "process"],
      "--agent-kubeconfig",
    ],
    [["--mode", "primary", ...base, "--allowed-target-kinds", "job"], "--allowed-target-kinds"],
    [["--mode", "primary", ...base, "--allowed-namespaces", "shop,Team_B"], "--allowed-namespaces"],
    [["--mode", "primary", ...base, "--allowed-targets", "shop/web"], "--allowed-targets"],
    [["--mode", "primary", ...base, "--allowed-targets", "shop/job/web"], "--allowed-targets"],
    [
      ["--mode", "primary", ...base, "--leader-lease-duration-seconds", "5"],
      "--leader-renew-deadline-seconds",
    ],
    [["--mode", "primary", ...base, "--grpc-listen", "nope"], "--grpc-listen"],
    [["--mode", "primary", ...base, "--max-connection-age-seconds", "0"], "--max-connection-age-seconds"],
    [["--mode", "primary", ...base, "--max-connection-age-seconds", "soon"], "--max-connection-age-seconds"],
    [
      ["--mode", "primary", ...base, "--max-connection-age-seconds", "9999999"],
      "--max-connection-age-seconds",
    ],
    [["--mode", "primary", ...base, "--tls-cert", "/nonexistent"], "--grpc-plaintext"],
  ])("refuses %j naming %s", (argv, flag) => {
    try {
      parseControlPlaneArgs(argv, {});
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(OptionError);
      expect((err as OptionError).option).toBe(flag);
    }
  });
});
