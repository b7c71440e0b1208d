import { describe, expect, it } from "vitest";
import { startFailure } from "./stack-start-failure.js";

describe("startFailure", () => {
  it("names the failing component's log, where the logs are kept, and the likely fix", () => {
    const err = startFailure(
      new Error(
        "east-control-plane exited (1) before it was ready; log /s/logs/east-control-plane.log:\nboom\n",
      ),
      "/s/logs",
      "kept",
    );
    expect(err.code).toBe("SWITCHYARD_EMBEDDED_STACK_START_FAILED");
    expect(err.message).toContain("log /s/logs/east-control-plane.log");
    expect(err.message).toContain("logs: /s/logs (kept until the next start)");
    expect(err.message).toMatch(/likely fix: read the log named above/);
  });

  it("says to stop the other stack when the demo app's address is taken", () => {
    const err = startFailure(
      new Error("127.0.0.2:8080 is taken: another embedded stack …"),
      "/s/logs",
      "removed",
    );
    expect(err.message).toContain("logs were removed with the stack");
    expect(err.message).toMatch(/likely fix: stop the other embedded stack \(Ctrl-C in its terminal\)/);
  });
});
