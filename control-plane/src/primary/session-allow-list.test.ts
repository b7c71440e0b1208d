import { describe, expect, it } from "vitest";
import { SessionAllowList } from "./session-allow-list.js";
import { OptionError } from "../../../lib/option-error.js";

describe("SessionAllowList", () => {
  it("allows everything by default", () => {
    expect(new SessionAllowList().check("any", "pod/x")).toEqual({ allowed: true });
  });

  it("refuses namespaces outside the list with a reason and a fix", () => {
    const a = new SessionAllowList({ namespaces: ["shop", "dev"] });
    expect(a.check("shop", "deployment/web").allowed).toBe(true);
    const v = a.check("kube-system", "deployment/web");
    expect(v).toMatchObject({ allowed: false, reason: "NamespaceNotAllowed" });
    expect(v.allowed === false && v.message).toMatch(/kube-system.*dev, shop.*administrator/);
  });

  it("refuses target kinds outside the list", () => {
    const a = new SessionAllowList({ targetKinds: ["deployment"] });
    expect(a.check("shop", "deployment/web/container/app").allowed).toBe(true);
    expect(a.check("shop", "pod/web-0")).toMatchObject({ allowed: false, reason: "TargetKindNotAllowed" });
  });

  it("rejects options that cannot be meant", () => {
    expect(() => new SessionAllowList({ namespaces: [] })).toThrow(OptionError);
    expect(() => new SessionAllowList({ namespaces: ["*", "shop"] })).toThrow(OptionError);
    expect(() => new SessionAllowList({ namespaces: ["Not_A_Namespace"] })).toThrow(/RFC 1123/);
    expect(() => new SessionAllowList({ targetKinds: ["job" as never] })).toThrow(/not one of/);
  });
});
