import { describe, expect, it } from "vitest";
import { SessionAllowList } from "./session-allow-list.js";
import { parseTargetPattern } from "./target-pattern.js";
import { OptionError } from "../../../lib/option-error.js";

describe("SessionAllowList", () => {
  it("allows everything by default", () => {
    expect(new SessionAllowList().check("any", "pod/x")).toEqual({ allowed: true });
  });

  it("refuses namespaces outside the list, naming the field and the fix", () => {
    const a = new SessionAllowList({ namespaces: ["shop", "dev"] });
    expect(a.check("shop", "deployment/web").allowed).toBe(true);
    const v = a.check("kube-system", "deployment/web");
    expect(v).toMatchObject({ allowed: false, reason: "NamespaceNotAllowed", field: "metadata.namespace" });
    expect(v.allowed === false && v.message).toMatch(
      /^metadata\.namespace: namespace kube-system is not in the operator's session allow-list \(dev, shop\).*administrator.*sessions\.allowedNamespaces.*--allowed-namespaces/,
    );
  });

  it("refuses target kinds outside the list", () => {
    const a = new SessionAllowList({ targetKinds: ["deployment"] });
    expect(a.check("shop", "deployment/web/container/app").allowed).toBe(true);
    const v = a.check("shop", "pod/web-0");
    expect(v).toMatchObject({ allowed: false, reason: "TargetKindNotAllowed", field: "spec.target" });
    expect(v.allowed === false && v.message).toMatch(/^spec\.target: .*--allowed-target-kinds/);
  });

  it("refuses targets that match no pattern, per namespace, whatever their container", () => {
    const a = new SessionAllowList({
      targets: ["shop/deployment/web", "shop/deployment/api-*", "team-*/*/*", "*/statefulset/db"],
    });
    for (const [ns, target] of [
      ["shop", "deployment/web"],
      ["shop", "deployment/web/container/app"],
      ["shop", "deployment/api-v2"],
      ["team-a", "pod/anything"],
      ["other", "statefulset/db"],
    ])
      expect(a.check(ns!, target!)).toEqual({ allowed: true });
    for (const [ns, target] of [
      ["shop", "deployment/worker"],
      ["shop", "statefulset/web"], // the kind is part of the pattern
      ["shop", "deployment/api"], // api-* needs the dash
      ["tenant-b", "deployment/web"], // the same name in another namespace
      ["team", "pod/x"],
      ["other", "statefulset/db-0"],
    ]) {
      const v = a.check(ns!, target!);
      expect(v).toMatchObject({ allowed: false, reason: "TargetNotAllowed", field: "spec.target" });
      expect(v.allowed === false && v.message).toMatch(
        new RegExp(
          `^spec\\.target: target ${ns}/.* matches none of .*sessions\\.allowedTargets.*--allowed-targets`,
        ),
      );
    }
  });

  it("checks namespaces, kinds and targets together", () => {
    const a = new SessionAllowList({
      namespaces: ["shop"],
      targetKinds: ["deployment"],
      targets: ["*/*/web"],
    });
    expect(a.check("shop", "deployment/web").allowed).toBe(true);
    expect(a.check("other", "deployment/web")).toMatchObject({ reason: "NamespaceNotAllowed" });
    expect(a.check("shop", "pod/web")).toMatchObject({ reason: "TargetKindNotAllowed" });
    expect(a.check("shop", "deployment/api")).toMatchObject({ reason: "TargetNotAllowed" });
    expect(a.check("shop", "job/web")).toMatchObject({ reason: "InvalidTarget", field: "spec.target" });
  });

  it("names only the first patterns of a long list", () => {
    const targets = Array.from({ length: 25 }, (_, i) => `shop/deployment/app-${i}`);
    const v = new SessionAllowList({ targets }).check("shop", "deployment/web");
    expect(v.allowed === false && v.message).toContain("app-9 and 15 more");
  });

  it("rejects options that cannot be meant", () => {
    expect(() => new SessionAllowList({ namespaces: [] })).toThrow(OptionError);
    expect(() => new SessionAllowList({ namespaces: ["*", "shop"] })).toThrow(OptionError);
    expect(() => new SessionAllowList({ namespaces: ["Not_A_Namespace"] })).toThrow(/RFC 1123/);
    expect(() => new SessionAllowList({ targetKinds: ["job" as never] })).toThrow(/not one of/);
    expect(() => new SessionAllowList({ targets: [] })).toThrow(/allowList\.targets.*empty/);
    for (const bad of [
      "shop/web",
      "shop/job/web",
      "Shop/deployment/web",
      "shop/deployment/",
      "/*/*",
      "a/b/c/d",
    ])
      expect(() => new SessionAllowList({ targets: [bad] })).toThrow(/is not a target pattern/);
  });
});

describe("target patterns", () => {
  it("match * as any run of characters within one part", () => {
    const p = parseTargetPattern("*/deployment/a*b*c", "--allowed-targets");
    expect(p.matches("shop", "deployment", "abc")).toBe(true);
    expect(p.matches("shop", "deployment", "a-x-b-y-c")).toBe(true);
    expect(p.matches("shop", "deployment", "a-x-b-y-c-d")).toBe(false);
    expect(p.matches("shop", "statefulset", "abc")).toBe(false);
    const stars = parseTargetPattern(`*/*/${"a*".repeat(40)}b`, "x");
    // A backtracking regex would take ages here (and time the test out).
    expect(stars.matches("ns", "pod", "a".repeat(253))).toBe(false);
  });

  it("name the option in errors", () => {
    expect(() => parseTargetPattern("nope", "--allowed-targets")).toThrow(
      expect.objectContaining({ option: "--allowed-targets" }),
    );
  });
});
