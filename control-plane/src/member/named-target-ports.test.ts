// Which Service ports are taken by name, and which PodSecurity levels refuse the redirect (pure).
import { describe, expect, it } from "vitest";
import { namedTargetPortsOf, podSecurityRefusal } from "./named-target-ports.js";

describe("namedTargetPortsOf", () => {
  it("takes named TCP targetPorts of the Services selecting the labels only", () => {
    const services = [
      {
        spec: {
          selector: { app: "web" },
          ports: [
            { port: 80, targetPort: "http" },
            { port: 81, targetPort: 81 },
          ],
        },
      },
      { spec: { selector: { app: "other" }, ports: [{ port: 80, targetPort: "admin" }] } },
      { spec: { selector: { app: "web" }, ports: [{ port: 53, protocol: "UDP", targetPort: "dns" }] } },
    ];
    expect([...namedTargetPortsOf(services as never, { app: "web" })]).toEqual(["http"]);
  });
});

describe("podSecurityRefusal", () => {
  it("refuses baseline and restricted, naming the level and the fix", () => {
    expect(podSecurityRefusal("shop", { "pod-security.kubernetes.io/enforce": "baseline" })?.message).toMatch(
      /shop enforces PodSecurity "baseline".*fix/,
    );
    expect(podSecurityRefusal("shop", { "pod-security.kubernetes.io/enforce": "restricted" })?.level).toBe(
      "restricted",
    );
    expect(
      podSecurityRefusal("shop", { "pod-security.kubernetes.io/enforce": "privileged" }),
    ).toBeUndefined();
    expect(podSecurityRefusal("shop", undefined)).toBeUndefined();
  });
});
