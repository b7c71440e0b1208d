// A target's ensured agents stand for the next sessions only while fresh and only for the
// ready pods they were made for.
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { OptionError } from "../../../lib/option-error.js";
import { EnsuredTargets, type EnsuredTarget } from "./ensured-targets.js";

const pod = (uid: string, ip: string): V1Pod => ({
  metadata: { name: `p-${uid}`, uid },
  status: { podIP: ip },
});
const value = (tag: string): EnsuredTarget => ({
  secret: { secret: tag, hash: "a".repeat(64) },
  agents: [{ id: "p-1", pod: pod("1", "10.0.0.1"), baseUrl: "ws://10.0.0.1:9440" }],
});

describe("EnsuredTargets", () => {
  it("gives a result back while fresh, for the same ready pods in any order", () => {
    let now = 1000;
    const t = new EnsuredTargets(5000, () => now);
    const pods = [pod("1", "10.0.0.1"), pod("2", "10.0.0.2")];
    t.set("ns/deployment/web", pods, value("s1"));
    now += 4999;
    expect(t.get("ns/deployment/web", [...pods].reverse())?.secret.secret).toBe("s1");
    expect(t.get("ns/deployment/other", pods)).toBeUndefined();
    now += 1;
    expect(t.get("ns/deployment/web", pods)).toBeUndefined();
    expect(t.size).toBe(0);
  });

  it("does not stand for other ready pods: one replaced, one more, one gone, a new IP", () => {
    const t = new EnsuredTargets(5000, () => 0);
    const pods = [pod("1", "10.0.0.1"), pod("2", "10.0.0.2")];
    for (const other of [
      [pod("1", "10.0.0.1"), pod("3", "10.0.0.3")],
      [...pods, pod("3", "10.0.0.3")],
      [pod("1", "10.0.0.1")],
      [pod("1", "10.0.0.9"), pod("2", "10.0.0.2")],
    ]) {
      t.set("t", pods, value("s"));
      expect(t.get("t", other)).toBeUndefined();
    }
  });

  it("forgets on request, and keeps nothing with a freshness of 0", () => {
    const t = new EnsuredTargets(5000, () => 0);
    t.set("t", [pod("1", "10.0.0.1")], value("s"));
    t.forget("t");
    expect(t.get("t", [pod("1", "10.0.0.1")])).toBeUndefined();
    const off = new EnsuredTargets(0, () => 0);
    off.set("t", [pod("1", "10.0.0.1")], value("s"));
    expect(off.get("t", [pod("1", "10.0.0.1")])).toBeUndefined();
    expect(() => new EnsuredTargets(-1)).toThrow(OptionError);
  });
});
