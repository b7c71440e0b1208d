import { describe, expect, it } from "vitest";
import { planCopy } from "../copy-plan.js";
import { pgCopyCommand, pgQualifiedTable, pgQuoteIdentifier, pgStreamSteps } from "./pg-copy-commands.js";

const COMMON = ["--no-owner", "--no-privileges", "--no-publications", "--no-subscriptions"];

describe("pgCopyCommand", () => {
  it("schema with a filter: pre-data dump, COPY out and in, post-data dump", () => {
    const commands = planCopy({
      mode: "schema",
      filters: [{ table: "shop.Orders", where: "a = 1 OR b = 2" }],
    }).map(pgCopyCommand);
    expect(commands).toEqual([
      { tool: "none" },
      { tool: "pg_dump", args: ["--section=pre-data", ...COMMON] },
      {
        tool: "copy",
        source: 'COPY (SELECT * FROM "shop"."Orders" WHERE (a = 1 OR b = 2)) TO STDOUT',
        branch: 'COPY "shop"."Orders" FROM STDIN',
      },
      { tool: "pg_dump", args: ["--section=post-data", ...COMMON] },
    ]);
  });

  it("empty with filters: dumps only the filtered tables, quoted", () => {
    const commands = planCopy({
      mode: "empty",
      filters: [
        { table: "users", where: "id = 1" },
        { table: "public.orders", where: "user_id = 1" },
      ],
    }).map(pgCopyCommand);
    expect(commands[1]).toEqual({
      tool: "pg_dump",
      args: ["--section=pre-data", ...COMMON, '--table="users"', '--table="public"."orders"'],
    });
    expect(commands.at(-1)).toMatchObject({ args: expect.arrayContaining(['--table="public"."orders"']) });
  });

  it("all: every row in the data section", () => {
    expect(planCopy({ mode: "all" }).map(pgCopyCommand)[2]).toEqual({
      tool: "pg_dump",
      args: ["--section=data", ...COMMON],
    });
  });
});

describe("pgStreamSteps", () => {
  it("runs mode all as one dump of the whole database, as pg_dump | psql does", () => {
    expect(pgStreamSteps(planCopy({ mode: "all" }))).toEqual([
      { step: { kind: "copyAllRows" }, command: { tool: "pg_dump", args: COMMON } },
    ]);
  });

  it("keeps the sections of schema mode and the filtered rows, in the plan's order, without createDatabase", () => {
    const steps = pgStreamSteps(
      planCopy({ mode: "schema", filters: [{ table: "orders", where: "id < 3" }] }),
    );
    expect(steps.map((s) => s.step.kind)).toEqual(["copySchema", "copyRows", "copySchema"]);
    expect(steps.map((s) => s.command.tool)).toEqual(["pg_dump", "copy", "pg_dump"]);
  });
});

describe("pgQuoteIdentifier", () => {
  it("double-quotes and doubles embedded quotes", () => {
    expect(pgQuoteIdentifier('a"b')).toBe('"a""b"');
    expect(pgQualifiedTable({ schema: undefined, name: "t" })).toBe('"t"');
  });
});
