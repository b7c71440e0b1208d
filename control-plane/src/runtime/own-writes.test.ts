// A controller's own writes do not wake it again; everything else still does.
import type { KubernetesObject } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { OwnWrites } from "./own-writes.js";

const obj = (name: string, rv: string, namespace = "ns"): KubernetesObject => ({
  metadata: { name, namespace, resourceVersion: rv },
});

describe("OwnWrites", () => {
  it("skips the update event of each own write once, in any order; others' writes wake", () => {
    const w = new OwnWrites();
    w.record(obj("a", "10"));
    w.record(obj("a", "11"));
    expect(w.notOwn(obj("a", "9"), "update")).toBe(true); // someone else's, earlier
    expect(w.notOwn(obj("a", "11"), "update")).toBe(false);
    expect(w.notOwn(obj("a", "10"), "update")).toBe(false);
    expect(w.notOwn(obj("a", "10"), "update")).toBe(true); // a resync of the same version
    expect(w.notOwn(obj("a", "12"), "update")).toBe(true);
    expect(w.skipped).toBe(2);
    expect(w.size).toBe(0);
  });

  it("tells objects apart by namespace and name, and never skips adds or deletes", () => {
    const w = new OwnWrites();
    w.record(obj("a", "10"));
    expect(w.notOwn(obj("a", "10", "other"), "update")).toBe(true);
    expect(w.notOwn(obj("b", "10"), "update")).toBe(true);
    expect(w.notOwn(obj("a", "10"), "add")).toBe(true);
    w.record(obj("a", "20"));
    expect(w.notOwn(obj("a", "20"), "delete")).toBe(true);
    expect(w.notOwn(obj("a", "20"), "update")).toBe(true); // forgotten with the delete
  });

  it("matches only within the window: an event seen before the write's answer leaves nothing a resync matches", () => {
    let now = 0;
    const w = new OwnWrites({ windowMs: 10_000, now: () => now });
    w.record(obj("a", "10"));
    now = 10_000;
    expect(w.notOwn(obj("a", "10"), "update")).toBe(true);
    expect(w.size).toBe(0);
    // At most a few writes per object are kept.
    for (let rv = 1; rv <= 6; rv++) w.record(obj("b", String(rv)));
    expect(w.notOwn(obj("b", "1"), "update")).toBe(true);
    expect(w.notOwn(obj("b", "6"), "update")).toBe(false);
  });
});
