import { describe, expect, it } from "vitest";
import {
  branchConnectionUrl,
  parseSourceUrl,
  redactedUrl,
  SOURCE_URL_INVALID,
  SourceUrlError,
} from "./connection-url.js";

const FROM = "environment variable DATABASE_URL of deployment/web";
const SECRET = "s3cr%t:/@?#pw";
const enc = encodeURIComponent(SECRET);

function errorOf(fn: () => unknown): SourceUrlError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(SourceUrlError);
    return e as SourceUrlError;
  }
  throw new Error("expected a SourceUrlError");
}

describe("branchConnectionUrl", () => {
  it("writes postgres:// and mysql:// URLs with percent-encoded parts", () => {
    const endpoint = { host: "db.shop", port: 6543, database: "sy_x_abc", user: "us er", password: SECRET };
    const pg = branchConnectionUrl("PgBranchDatabase", endpoint);
    expect(pg).toBe(`postgres://us%20er:${enc}@db.shop:6543/sy_x_abc`);
    expect(branchConnectionUrl("MysqlBranchDatabase", endpoint)).toMatch(/^mysql:\/\/us%20er:/);
    // Round trip: what we write is what we read.
    expect(parseSourceUrl("PgBranchDatabase", pg, FROM)).toMatchObject({ ...endpoint, params: {} });
  });

  it("brackets IPv6 hosts and leaves out a missing password", () => {
    const url = branchConnectionUrl("PgBranchDatabase", {
      host: "::1",
      port: 5432,
      database: "d",
      user: "u",
      password: undefined,
    });
    expect(url).toBe("postgres://u@[::1]:5432/d");
    expect(parseSourceUrl("PgBranchDatabase", url, FROM)).toMatchObject({ host: "::1", password: undefined });
  });

  it("redacts the password", () => {
    const endpoint = { host: "h", port: 1, database: "d", user: "u", password: SECRET };
    expect(redactedUrl("MysqlBranchDatabase", endpoint)).toBe("mysql://u:***@h:1/d");
  });
});

describe("parseSourceUrl", () => {
  it("parses a Postgres URL, defaulting the port and keeping parameters", () => {
    expect(
      parseSourceUrl("PgBranchDatabase", `postgresql://app:${enc}@pg.internal/shop?sslmode=require`, FROM),
    ).toEqual({
      host: "pg.internal",
      port: 5432,
      database: "shop",
      user: "app",
      password: SECRET,
      params: { sslmode: "require" },
    });
  });

  it("parses MySQL and MariaDB URLs", () => {
    expect(parseSourceUrl("MysqlBranchDatabase", "mysql://root:pw@10.0.0.5:3307/app", FROM)).toMatchObject({
      host: "10.0.0.5",
      port: 3307,
      database: "app",
      user: "root",
      password: "pw",
    });
    expect(parseSourceUrl("MysqlBranchDatabase", "MariaDB://u@m/app", FROM).port).toBe(3306);
  });

  const refused: [string, string, RegExp][] = [
    [
      "wrong engine",
      `mysql://u:${enc}@h/d`,
      /scheme mysql:\/\/ is not supported: expected postgres:\/\/ or postgresql:\/\//,
    ],
    ["JDBC", `jdbc:postgresql://h/d?password=${enc}`, /is a JDBC URL/],
    ["not a URL", `${SECRET}`, /is not a URL/],
    ["user:password without scheme", `app:${SECRET}@h/d`, /is not a URL/],
    ["no scheme", "just words", /is not a URL/],
    ["no host", `postgres://u:${enc}@/d`, /has no host|not a valid URL/],
    ["socket", `postgres:///d?host=/var/run/postgresql`, /has no host/],
    ["several hosts", `postgres://u:${enc}@h1,h2/d`, /several hosts/],
    ["bad port", `postgres://u:${enc}@h:99999/d`, /not a valid URL/],
    ["port 0", `postgres://u:${enc}@h:0/d`, /port that is not 1 to 65535/],
    ["no database", `postgres://u:${enc}@h:5432`, /has no database/],
    ["empty database", `postgres://u:${enc}@h:5432/`, /has no database/],
    ["nested path", `postgres://u:${enc}@h/a/b`, /several segments/],
    ["odd database", `postgres://u:${enc}@h/shop%20db`, /database name \(the path\) that is not supported/],
    ["long database", `postgres://u:${enc}@h/${"d".repeat(64)}`, /at most 63 characters/],
    ["unencoded / in the password", "postgres://app:12/s3cr@h", /database name \(the path\)/],
    ["no user", `postgres://:${enc}@h/d`, /has no user/],
    ["password parameter", `postgres://u@h/d?password=${enc}`, /password parameter/],
    ["host parameter", `postgres://u:${enc}@h/d?host=other`, /parameter host overrides/],
    ["broken percent in password", "postgres://u:pa%zz%@h/d", /password is not valid percent-encoding/],
    ["opaque", `postgres:u:${enc}@h/d`, /is not a URL: expected postgres:\/\//],
  ];

  it.each(refused)("refuses %s, naming the source and never the password", (_, url, problem) => {
    const e = errorOf(() => parseSourceUrl("PgBranchDatabase", url, FROM));
    expect(e.code).toBe(SOURCE_URL_INVALID);
    expect(e.message.startsWith(`${FROM}: `)).toBe(true);
    expect(e.message).toMatch(problem);
    for (const secret of [SECRET, enc, "pa%zz%", "s3cr"]) expect(e.message).not.toContain(secret);
    expect(e.cause).toBeUndefined();
    expect(JSON.stringify(e)).not.toContain("s3cr");
  });
});
