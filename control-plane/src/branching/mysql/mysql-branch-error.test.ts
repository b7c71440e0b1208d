import { describe, expect, it } from "vitest";
import {
  fromDriverError,
  fromToolFailure,
  redact,
  summarizeToolOutput,
  toolErrno,
} from "./mysql-branch-error.js";

describe("MySQL branch errors", () => {
  it("read the server's error number from each tool's output", () => {
    expect(toolErrno("ERROR 1064 (42000) at line 3: You have an error")).toBe(1064);
    expect(
      toolErrno(`mariadb-dump: Got error: 1045: "Access denied for user 'app'@'x'" when trying to connect`),
    ).toBe(1045);
    expect(
      toolErrno("mariadb-dump: Couldn't execute 'SELECT …': Table 'shop.nope' doesn't exist (1146)"),
    ).toBe(1146);
    expect(toolErrno("mariadb-dump: connection lost")).toBeUndefined();
  });

  it("make source credentials and missing tables terminal, and a lost connection retryable", () => {
    const denied = fromToolFailure(
      "mariadb-dump",
      "copying",
      "exited with status 2",
      "Got error: 1045: denied",
      [],
      "source",
    );
    expect(denied).toMatchObject({ terminal: true, reason: "SourceAccessDenied" });
    const missing = fromDriverError(
      { errno: 1146, code: "ER_NO_SUCH_TABLE", sqlMessage: "no table" },
      "checking",
      [],
      "source",
    );
    expect(missing).toMatchObject({ terminal: true, reason: "TableMissing" });
    const lost = fromDriverError({ code: "ECONNRESET", message: "read ECONNRESET" }, "copying", [], "source");
    expect(lost).toMatchObject({ terminal: false });
  });

  it("on the branch side, make only what the server lacks terminal", () => {
    expect(fromDriverError({ errno: 1045, sqlMessage: "denied" }, "connecting", [], "branch").terminal).toBe(
      false,
    );
    expect(
      fromDriverError({ errno: 1273, sqlMessage: "Unknown collation" }, "creating", [], "branch"),
    ).toMatchObject({
      terminal: true,
      reason: "CollationUnsupported",
    });
  });

  it("never carry a password, whatever the server echoed", () => {
    const err = fromDriverError(
      {
        errno: 1064,
        sqlMessage: "syntax near 'IDENTIFIED BY 'Pw123secret''",
        sql: "CREATE USER … 'Pw123secret'",
      },
      "creating the branch user",
      ["Pw123secret", undefined],
      "branch",
    );
    expect(err.message).not.toContain("Pw123secret");
    expect(err.cause).toBeUndefined();
    expect(redact("a s3 b s3", ["s3", ""])).toBe("a *** b ***");
  });

  it("keep the error lines of a tool's output, never the statement it echoed", () => {
    const stderr = [
      "--------------",
      `INSERT INTO \`customers\` VALUES (1,'${"private row data ".repeat(100)}')`,
      "--------------",
      "",
      "ERROR 1406 (22001) at line 12: Data too long for column 'name' at row 1",
      "",
    ].join("\n");
    expect(summarizeToolOutput(stderr)).toBe(
      "ERROR 1406 (22001) at line 12: Data too long for column 'name' at row 1",
    );
    const err = fromToolFailure("mariadb", "copying rows", "exited with status 1", stderr, [], "branch");
    expect(err.message).not.toContain("private row data");
    expect(summarizeToolOutput("x".repeat(1000))).toHaveLength(401);
  });
});
