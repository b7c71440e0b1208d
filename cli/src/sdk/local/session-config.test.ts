// Config file parsing and flag precedence: a target alone is a complete file, flags win,
// and every mistake names the field and the fix.
import { describe, expect, it } from "vitest";
import { parseConfigText, parsePortMapping, resolveConfig } from "./session-config.js";

describe("session config", () => {
  it('accepts {"target": …} alone and fills the defaults', () => {
    const cfg = resolveConfig(parseConfigText('{"target": "deployment/myapp"}'), {});
    expect(cfg).toEqual({
      target: "deployment/myapp",
      router: [],
      mode: "mirror",
      ports: [],
      envInclude: [],
      envExclude: [],
      proxy: true,
      network: "auto",
      keepLocal: [],
      files: [],
      branches: [],
      branchTimeoutSeconds: 120,
      queues: [],
    });
  });

  it("reads the network section, flags overriding it, and names a bad mode or path", () => {
    const file = parseConfigText(
      JSON.stringify({
        target: "deployment/a",
        network: { mode: "transparent", keepLocal: ["10.0.0.0/8"], files: ["/app/config.yaml"] },
      }),
    );
    expect(resolveConfig(file, {})).toMatchObject({
      network: "transparent",
      keepLocal: ["10.0.0.0/8"],
      files: ["/app/config.yaml"],
    });
    expect(resolveConfig(file, { network: "proxy", keepLocal: ["192.168.1.0/24"] })).toMatchObject({
      network: "proxy",
      keepLocal: ["192.168.1.0/24"],
    });
    expect(() => resolveConfig(file, { network: "tun" })).toThrow(
      /--network must be auto, transparent or proxy/,
    );
    expect(() => resolveConfig(file, { files: ["etc/x"] })).toThrow(
      /--files "etc\/x" must be the container's absolute path/,
    );
    expect(() =>
      parseConfigText(JSON.stringify({ target: "deployment/a", network: { mode: "tun" } })),
    ).toThrow(/network/);
  });

  it("lets flags override the file", () => {
    const file = parseConfigText(
      JSON.stringify({
        target: "deployment/a",
        namespace: "shop",
        mode: "mirror",
        ports: [8080],
        env: { include: ["DB_*"] },
        router: "wss://r.example:8443",
      }),
    );
    const cfg = resolveConfig(file, {
      target: "deployment/b",
      steal: true,
      port: ["9090:3000"],
      envExclude: ["SECRET_*"],
    });
    expect(cfg.target).toBe("deployment/b");
    expect(cfg.namespace).toBe("shop");
    expect(cfg.mode).toBe("steal");
    expect(cfg.ports).toEqual([{ remote: 9090, local: 3000 }]);
    expect(cfg.envInclude).toEqual(["DB_*"]);
    expect(cfg.envExclude).toEqual(["SECRET_*"]);
    expect(cfg.router).toEqual(["wss://r.example:8443"]);
  });

  it("builds the HTTP filter from flags or from the file", () => {
    const fromFlags = resolveConfig(
      {},
      { target: "deployment/a", steal: true, port: ["80"], httpHeader: ["X-User: alice"], httpPath: "^/api" },
    );
    expect(fromFlags.httpFilter).toEqual({
      allOf: [{ header: { name: "X-User", valueRegex: "^(?:alice)$" } }, { path: "^/api" }],
    });
    const fromFile = resolveConfig(
      parseConfigText(
        JSON.stringify({
          target: "deployment/a",
          mode: "steal",
          ports: ["80"],
          httpFilter: { method: "post" },
        }),
      ),
      {},
    );
    expect(fromFile.httpFilter).toEqual({ method: "POST" });
  });

  it.each([
    ["{", /not valid JSON/],
    ['{"target": "deployment/a", "prots": [1]}', /prots/],
    ['{"target": "deployment/a", "ports": [true]}', /ports\.0/],
    ['{"target": "deployment/a", "mode": "copy"}', /mode/],
  ])("rejects a bad file %s naming the problem", (text, msg) => {
    expect(() => parseConfigText(text, "switchyard.json")).toThrow(msg);
    try {
      parseConfigText(text);
    } catch (err) {
      expect((err as { code: string }).code).toBe("SWITCHYARD_CLI_CONFIG_INVALID");
    }
  });

  it.each([
    [{}, /no target/],
    [{ target: "myapp" }, /invalid target "myapp"/],
    [{ target: "deployment/a", steal: true, mirror: true }, /exclude each other/],
    [{ target: "deployment/a", port: ["70000"] }, /PORT or PORT:LOCALPORT/],
    [{ target: "deployment/a", port: ["80", "80:81"] }, /listed twice/],
    [{ target: "deployment/a", httpPath: "^/api", port: ["80"] }, /need --steal/],
    [{ target: "deployment/a", steal: true, httpPath: "^/api" }, /needs the port/],
    [{ target: "deployment/a", steal: true, port: ["80"], httpPath: "([" }, /not a valid regular expression/],
    [{ target: "deployment/a", ttl: "5" }, /--ttl/],
  ])("rejects flags %j", (flags, msg) => {
    expect(() => resolveConfig({}, flags)).toThrow(msg);
  });

  it("parses port mappings", () => {
    expect(parsePortMapping("8080")).toEqual({ remote: 8080, local: 8080 });
    expect(parsePortMapping(" 80:3000 ")).toEqual({ remote: 80, local: 3000 });
    expect(parsePortMapping(443)).toEqual({ remote: 443, local: 443 });
    expect(() => parsePortMapping("0")).toThrow(/1-65535/);
    expect(() => parsePortMapping("a:b")).toThrow(/PORT/);
  });
});
