import { describe, expect, it } from "vitest";
import { withDeletions } from "./parent-status-writer.js";

describe("withDeletions", () => {
  it("deletes the keys a child entry dropped, keeps clusters left out, and passes explicit removals", () => {
    const current = {
      phase: "Ready",
      children: {
        east: { name: "s-east", ready: true, gateway: "wss://east:8443" },
        west: { name: "s-west", ready: true, gateway: "wss://west:8443", error: "unreachable: timeout" },
        gone: { name: "s-gone", ready: false },
        leaving: { name: "s-leaving", ready: false },
      },
    };
    const patch = withDeletions(
      {
        phase: "Ready",
        children: {
          east: { name: "s-east", ready: false },
          west: { name: "s-west", ready: true, gateway: "wss://west:8443" },
          gone: null as never,
        },
      },
      current,
    );
    expect(patch).toEqual({
      phase: "Ready",
      children: {
        east: { name: "s-east", ready: false, gateway: null },
        west: { name: "s-west", ready: true, gateway: "wss://west:8443", error: null },
        gone: null,
      },
    });
  });

  it("leaves a status without children, or a first write, as it is", () => {
    const status = { phase: "Initializing" as const };
    expect(withDeletions(status, {})).toBe(status);
    const first = { children: { east: { name: "s-east", ready: false } } };
    expect(withDeletions(first, { phase: "Initializing" })).toBe(first);
  });
});
