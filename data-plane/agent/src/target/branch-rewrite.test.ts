import { describe, expect, it } from "vitest";
import { ErrorCode } from "../../../../proto/error-codes.js";
import { rewriteBranchDatabase, rewriteBranches, type BranchRewrite } from "./branch-rewrite.js";

const SOURCE_PASSWORD = "s3cr3t-source";
const BRANCH_PASSWORD = "Br4nchPassw0rdXYZ";

const branch = (over: Partial<BranchRewrite> = {}): BranchRewrite => ({
  variable: "DATABASE_URL",
  database: "sy_app_abc",
  user: "sy_app_abc",
  password: BRANCH_PASSWORD,
  host: "127.0.0.1",
  port: 40123,
  ...over,
});

const rewritten = (url: string, r: BranchRewrite = branch()) =>
  rewriteBranches(new Map([[r.variable, url]]), [r]).get(r.variable);

function thrown(fn: () => unknown): Error & { code?: string } {
  try {
    fn();
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error("expected a throw");
}

describe("rewriteBranches", () => {
  it.each([
    ["postgres", `postgres://app:${SOURCE_PASSWORD}@db.shop.svc:5432/app?sslmode=disable&application_name=x`],
    ["postgresql", `postgresql://app:${SOURCE_PASSWORD}@db.shop.svc/app?sslmode=disable&application_name=x`],
    ["mysql", `mysql://app:${SOURCE_PASSWORD}@db.shop.svc:3306/app?sslmode=disable&application_name=x`],
    ["mariadb", `mariadb://app@db.shop.svc/app?sslmode=disable&application_name=x`],
  ])("points a %s URL at the branch, keeping scheme and query", (scheme, url) => {
    expect(rewritten(url)).toBe(
      `${scheme}://sy_app_abc:${BRANCH_PASSWORD}@127.0.0.1:40123/sy_app_abc?sslmode=disable&application_name=x`,
    );
  });

  it("percent-encodes credentials so a driver decodes them back", () => {
    const out = rewritten(
      "postgres://a:b@db/app",
      branch({ user: "u@x", password: "p:/@?#%&", database: "d b" }),
    )!;
    const u = new URL(out);
    expect(decodeURIComponent(u.username)).toBe("u@x");
    expect(decodeURIComponent(u.password)).toBe("p:/@?#%&");
    expect(decodeURIComponent(u.pathname.slice(1))).toBe("d b");
    expect(u.host).toBe("127.0.0.1:40123");
  });

  it("brackets an IPv6 host", () => {
    expect(rewritten("mysql://a@db/app", branch({ host: "::1" }))).toBe(
      `mysql://sy_app_abc:${BRANCH_PASSWORD}@[::1]:40123/sy_app_abc`,
    );
  });

  it("applies several rewrites and leaves its input untouched", () => {
    const env = new Map([
      ["DATABASE_URL", "postgres://a@db/app"],
      ["CACHE_DB", "mysql://a@mysql/cache"],
      ["HOME", "/root"],
    ]);
    const out = rewriteBranches(env, [
      branch(),
      branch({ variable: "CACHE_DB", database: "c", user: "cu", port: 40124 }),
    ]);
    expect(out.get("DATABASE_URL")).toContain("@127.0.0.1:40123/sy_app_abc");
    expect(out.get("CACHE_DB")).toBe(`mysql://cu:${BRANCH_PASSWORD}@127.0.0.1:40124/c`);
    expect(out.get("HOME")).toBe("/root");
    expect(env.get("DATABASE_URL")).toBe("postgres://a@db/app");
  });

  it("names the variable and the fix when the target lacks it", () => {
    const e = thrown(() => rewriteBranches(new Map([["HOME", "/"]]), [branch()]));
    expect(e.code).toBe(ErrorCode.ENV_KEY_NOT_FOUND);
    expect(e.message).toMatch(/the target has no variable DATABASE_URL/);
    expect(e.message).toMatch(/branches\[\]\.envVar/);
    expect(e.message).not.toContain(BRANCH_PASSWORD);
  });

  it.each([
    ["not a URL", "not a url"],
    ["another scheme", `redis://u:${SOURCE_PASSWORD}@cache:6379/0`],
    ["a JDBC URL", `jdbc:postgresql://db:5432/app?password=${SOURCE_PASSWORD}`],
    ["no host", `postgres:///app?password=${SOURCE_PASSWORD}`],
  ])("refuses %s, naming the variable, without either password", (_what, url) => {
    const e = thrown(() => rewritten(url));
    expect(e.code).toBe(ErrorCode.ENV_UNSUPPORTED);
    expect(e.message).toMatch(/^DATABASE_URL is not a database URL with a host/);
    expect(e.message).toMatch(/set DATABASE_URL in the target to such a URL/);
    expect(e.message).not.toContain(SOURCE_PASSWORD);
    expect(e.message).not.toContain(BRANCH_PASSWORD);
  });

  it("refuses an incomplete rewrite, naming the field", () => {
    expect(() => rewritten("postgres://a@db/app", branch({ database: "" }))).toThrow(
      /branches\[0\] \(DATABASE_URL\) has no database/,
    );
    expect(() => rewritten("postgres://a@db/app", branch({ port: 0 }))).toThrow(
      /branches\[0\] \(DATABASE_URL\) port 0 must be 1-65535/,
    );
    expect(() => rewritten("postgres://a@db/app", branch({ variable: "" }))).toThrow(
      /branches\[0\]\.variable is empty/,
    );
  });
});

describe("rewriteBranchDatabase (the older form)", () => {
  it("points the database URL at the branch and keeps the rest", () => {
    const env = new Map([["DATABASE_URL", "postgres://u:p@db:5432/app?sslmode=disable"]]);
    expect(
      rewriteBranchDatabase(env, { variable: "DATABASE_URL", branch: "app-br-1" }).get("DATABASE_URL"),
    ).toBe("postgres://u:p@db:5432/app-br-1?sslmode=disable");
    expect(env.get("DATABASE_URL")).toContain("/app?"); // input untouched
  });
  it("leaves a missing variable alone and refuses one that is not a URL", () => {
    const env = new Map([["HOME", "/"]]);
    expect(rewriteBranchDatabase(env, { variable: "DATABASE_URL", branch: "b" })).toBe(env);
    expect(() =>
      rewriteBranchDatabase(new Map([["DATABASE_URL", "not a url"]]), {
        variable: "DATABASE_URL",
        branch: "b",
      }),
    ).toThrow(/not a URL/);
  });
});
