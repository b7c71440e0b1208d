import { describe, expect, it } from "vitest";
import {
  expandVars,
  filterEnv,
  parseQuantity,
  resolveContainerEnv,
  type EnvSources,
} from "./env-resolver.js";

const noSources: EnvSources = {
  configMap: async () => undefined,
  secret: async () => undefined,
  services: async () => ({ local: [], master: undefined }),
};

describe("expandVars", () => {
  const vars: Record<string, string> = { A: "1", B: "two" };
  const look = (n: string) => vars[n];
  it.each([
    ["$(A)", "1"],
    ["x-$(A)-$(B)", "x-1-two"],
    ["$$(A)", "$(A)"],
    ["$(MISSING)", "$(MISSING)"],
    ["$(A", "$(A"],
    ["cost $5", "cost $5"],
    ["trailing $", "trailing $"],
    ["$$$(A)", "$1"],
  ])("%s → %s", (input, want) => {
    expect(expandVars(input, look)).toBe(want);
  });
});

describe("resolveContainerEnv", () => {
  it("lets later entries win and expands against what is defined so far", async () => {
    const env = await resolveContainerEnv(
      {
        metadata: { name: "p", namespace: "ns" },
        spec: {
          containers: [
            {
              name: "app",
              env: [
                { name: "X", value: "first" },
                { name: "Y", value: "$(X)-y" },
                { name: "X", value: "second" },
                { name: "Z", value: "$(X)/$(LATER)" },
                { name: "LATER", value: "l" },
              ],
            },
          ],
        },
      },
      noSources,
    );
    expect(Object.fromEntries(env)).toEqual({ X: "second", Y: "first-y", Z: "second/$(LATER)", LATER: "l" });
  });

  it("refuses a missing required source with a clear error, and skips an optional one", async () => {
    const pod = (optional: boolean) => ({
      metadata: { name: "p", namespace: "ns" },
      spec: {
        containers: [
          {
            name: "app",
            env: [{ name: "K", valueFrom: { configMapKeyRef: { name: "cm", key: "k", optional } } }],
          },
        ],
      },
    });
    await expect(resolveContainerEnv(pod(false), noSources)).rejects.toMatchObject({
      code: "SWITCHYARD_ENV_SOURCE_NOT_FOUND",
      message: expect.stringContaining("ConfigMap ns/cm not found"),
    });
    expect((await resolveContainerEnv(pod(true), noSources)).has("K")).toBe(false);
  });

  it("names the container when it does not exist", async () => {
    await expect(
      resolveContainerEnv({ metadata: { name: "p" }, spec: { containers: [{ name: "app" }] } }, noSources, {
        container: "nope",
      }),
    ).rejects.toMatchObject({ code: "SWITCHYARD_ENV_CONTAINER_NOT_FOUND" });
  });
});

describe("filterEnv", () => {
  const env = new Map([
    ["DB_URL", "x"],
    ["DB_PASSWORD", "y"],
    ["HOME", "z"],
  ]);
  it("keeps includes and drops excludes", () => {
    expect([...filterEnv(env, ["DB_*"], ["*PASSWORD"]).keys()]).toEqual(["DB_URL"]);
    expect([...filterEnv(env, [], ["HOME"]).keys()]).toEqual(["DB_URL", "DB_PASSWORD"]);
    expect([...filterEnv(env).keys()]).toHaveLength(3);
  });
});

describe("parseQuantity", () => {
  it.each([
    ["500m", 0.5],
    ["2", 2],
    ["128Mi", 128 * 2 ** 20],
    ["1G", 1e9],
  ])("%s", (q, n) => expect(parseQuantity(q)).toBeCloseTo(n));
});
