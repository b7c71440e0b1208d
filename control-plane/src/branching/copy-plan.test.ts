import { describe, expect, it } from "vitest";
import { COPY_PLAN_INVALID, CopyPlanError, checkWhere, parseTableName, planCopy } from "./copy-plan.js";

const orders = { table: "shop.orders", where: "tenant_id = 42" };
const users = { table: "users", where: "id IN (1, 2)" };

function refusal(fn: () => unknown): CopyPlanError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(CopyPlanError);
    expect((e as CopyPlanError).code).toBe(COPY_PLAN_INVALID);
    return e as CopyPlanError;
  }
  throw new Error("expected a CopyPlanError");
}

describe("planCopy", () => {
  it("empty: the database only", () => {
    expect(planCopy({ mode: "empty" })).toEqual([{ kind: "createDatabase" }]);
  });

  it("empty with filters: the filtered tables' schema around their rows", () => {
    const tables = [
      { schema: "shop", name: "orders" },
      { schema: undefined, name: "users" },
    ];
    expect(planCopy({ mode: "empty", filters: [orders, users] })).toEqual([
      { kind: "createDatabase" },
      { kind: "copySchema", section: "pre-data", tables },
      { kind: "copyRows", table: tables[0], where: "tenant_id = 42", field: "spec.copy.filters[0]" },
      { kind: "copyRows", table: tables[1], where: "id IN (1, 2)", field: "spec.copy.filters[1]" },
      { kind: "copySchema", section: "post-data", tables },
    ]);
  });

  it("schema (the default): every table's schema, no rows", () => {
    const expected = [
      { kind: "createDatabase" },
      { kind: "copySchema", section: "pre-data", tables: "all" },
      { kind: "copySchema", section: "post-data", tables: "all" },
    ];
    expect(planCopy({ mode: "schema" })).toEqual(expected);
    expect(planCopy({})).toEqual(expected);
    expect(planCopy(undefined)).toEqual(expected);
  });

  it("schema with filters: the filtered rows load between the sections", () => {
    expect(planCopy({ mode: "schema", filters: [users] }).map((s) => s.kind)).toEqual([
      "createDatabase",
      "copySchema",
      "copyRows",
      "copySchema",
    ]);
  });

  it("all: schema and every row, indexes and constraints last", () => {
    expect(planCopy({ mode: "all" })).toEqual([
      { kind: "createDatabase" },
      { kind: "copySchema", section: "pre-data", tables: "all" },
      { kind: "copyAllRows" },
      { kind: "copySchema", section: "post-data", tables: "all" },
    ]);
  });

  it("refuses filters with all", () => {
    expect(refusal(() => planCopy({ mode: "all", filters: [users] })).field).toBe("spec.copy.filters");
  });

  it("refuses a table filtered twice, naming both filters", () => {
    const e = refusal(() =>
      planCopy({ mode: "schema", filters: [users, { table: "users", where: "true" }] }),
    );
    expect(e.message).toBe(
      "spec.copy.filters[1].table: users is filtered twice (also spec.copy.filters[0].table): join the conditions with OR",
    );
  });

  it("names the filter at fault", () => {
    const e = refusal(() => planCopy({ mode: "empty", filters: [users, { table: "a b", where: "true" }] }));
    expect(e.field).toBe("spec.copy.filters[1].table");
    const w = refusal(() =>
      planCopy({ mode: "empty", filters: [{ table: "t", where: "x=1; drop table t" }] }),
    );
    expect(w.field).toBe("spec.copy.filters[0].where");
  });
});

describe("parseTableName", () => {
  it("accepts table and schema.table", () => {
    expect(parseTableName("Orders", "f")).toEqual({ schema: undefined, name: "Orders" });
    expect(parseTableName("_s$.t_1", "f")).toEqual({ schema: "_s$", name: "t_1" });
  });

  it.each([
    "",
    "a.b.c",
    ".t",
    "s.",
    "1table",
    'orders"; drop',
    "orders;",
    "or ders",
    "ördersß",
    "t-1",
    "$t",
    "a".repeat(64),
  ])("refuses %j with the fix", (name) => {
    const e = refusal(() => parseTableName(name, "spec.copy.filters[0].table"));
    expect(e.message).toMatch(/^spec\.copy\.filters\[0\]\.table: /);
    expect(e.message).toMatch(/table|longer than 63/);
  });
});

describe("checkWhere", () => {
  it("keeps a condition as written", () => {
    const where = "created_at > now() - interval '7 days' AND status IN ('a', 'b')";
    expect(checkWhere(where, "w")).toBe(where);
  });

  it.each([
    ["x = 1; DELETE FROM t", /contains a ';' .* at character 6/],
    ["x = 1 -- trailing", /contains a '--' comment at character 7/],
    ["x = 1 /* hide */", /contains a '\/\*' comment at character 7/],
    ["   ", /is empty/],
  ])("refuses %j", (where, problem) => {
    expect(refusal(() => checkWhere(where, "spec.copy.filters[0].where")).message).toMatch(problem);
  });
});
