import { describe, expect, it } from "vitest";
import {
  LINGER_SECONDS_ANNOTATION,
  LINGER_UNTIL_ANNOTATION,
  REMOVE_REQUESTED_ANNOTATION,
} from "./agent-annotations.js";
import { lingerAnnotationProblem, lingerSecondsFor, lingerUntil, lingerUntilValue } from "./agent-linger.js";

describe("agent linger", () => {
  it("takes the workload's own linger when valid, else the install's", () => {
    expect(lingerSecondsFor(undefined, 900)).toBe(900);
    expect(lingerSecondsFor({ [LINGER_SECONDS_ANNOTATION]: "30" }, 900)).toBe(30);
    expect(lingerSecondsFor({ [LINGER_SECONDS_ANNOTATION]: " -1 " }, 900)).toBe(-1);
    expect(lingerSecondsFor({ [LINGER_SECONDS_ANNOTATION]: "0" }, 900)).toBe(0);
    for (const bad of ["-2", "1.5", "soon", "", "2592001"]) {
      expect(lingerSecondsFor({ [LINGER_SECONDS_ANNOTATION]: bad }, 900), bad).toBe(900);
      expect(lingerAnnotationProblem({ [LINGER_SECONDS_ANNOTATION]: bad }), bad).toContain(
        LINGER_SECONDS_ANNOTATION,
      );
    }
    expect(lingerAnnotationProblem({ [LINGER_SECONDS_ANNOTATION]: "60" })).toBeUndefined();
  });

  it("restores at once when a removal was asked for while sessions used the agent", () => {
    expect(
      lingerSecondsFor(
        { [REMOVE_REQUESTED_ANNOTATION]: "2026-12-05T10:00:00Z", [LINGER_SECONDS_ANNOTATION]: "-1" },
        900,
      ),
    ).toBe(0);
  });

  it("records until when, or never, and reads it back", () => {
    const now = Date.parse("2026-12-05T10:00:00.000Z");
    expect(lingerUntilValue(now, 900)).toBe("2026-12-05T10:15:00.000Z");
    expect(lingerUntilValue(now, -1)).toBe("never");
    expect(lingerUntil({ [LINGER_UNTIL_ANNOTATION]: "2026-12-05T10:15:00.000Z" })).toBe(now + 900_000);
    expect(lingerUntil({ [LINGER_UNTIL_ANNOTATION]: "never" })).toBe("never");
    expect(lingerUntil({})).toBeUndefined();
    // A mangled record must not keep an agent forever: it counts as run out.
    expect(lingerUntil({ [LINGER_UNTIL_ANNOTATION]: "tomorrow" })).toBe(0);
  });
});
