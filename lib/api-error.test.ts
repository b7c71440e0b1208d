import { describe, expect, it } from "vitest";
import { apiStatusMessage, describeApiError, firstLine } from "./api-error.js";

describe("describeApiError", () => {
  it("gives the status and the Status message of an API answer", () => {
    const err = Object.assign(new Error("HTTP-Code: 409"), {
      code: 409,
      body: JSON.stringify({ kind: "Status", message: 'multiclustersessions "x" already exists' }),
    });
    expect(describeApiError(err)).toBe('API server answered 409: multiclustersessions "x" already exists');
    expect(describeApiError({ code: 500, body: { message: "boom" } })).toBe("API server answered 500: boom");
  });

  it("gives the first line of a socket error", () => {
    expect(describeApiError(new Error("connect ECONNREFUSED 127.0.0.1:1\nstack"))).toBe(
      "connect ECONNREFUSED 127.0.0.1:1",
    );
    expect(firstLine("plain")).toBe("plain");
    expect(apiStatusMessage("not json")).toBe("not json");
  });
});
