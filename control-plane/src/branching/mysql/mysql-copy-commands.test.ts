import { describe, expect, it } from "vitest";
import { planCopy } from "../copy-plan.js";
import { MysqlBranchError } from "./mysql-branch-error.js";
import { mysqlStreamCommands } from "./mysql-copy-commands.js";

describe("mysqlStreamCommands", () => {
  it("copies mode all as one dump of everything, so every row comes from one snapshot", () => {
    expect(mysqlStreamCommands(planCopy({ mode: "all" }), "shop")).toEqual([
      { what: "everything", args: ["--routines", "--events", "--triggers", "shop"] },
    ]);
  });

  it("copies mode schema as tables, views, routines and events, then filtered rows, then triggers", () => {
    const plan = planCopy({ mode: "schema", filters: [{ table: "orders", where: "tenant = 1 OR id < 3" }] });
    expect(mysqlStreamCommands(plan, "shop")).toEqual([
      { what: "schema", args: ["--no-data", "--skip-triggers", "--routines", "--events", "shop"] },
      {
        what: "rows of orders where tenant = 1 OR id < 3",
        args: ["--no-create-info", "--skip-triggers", "--where=(tenant = 1 OR id < 3)", "shop", "orders"],
      },
      { what: "triggers", args: ["--no-data", "--no-create-info", "--triggers", "shop"] },
    ]);
  });

  it("copies mode empty as the filtered tables only", () => {
    const plan = planCopy({
      mode: "empty",
      filters: [
        { table: "customers", where: "id = 1" },
        { table: "shop.orders", where: "customer_id = 1" },
      ],
    });
    const commands = mysqlStreamCommands(plan, "shop");
    expect(commands[0]).toEqual({
      what: "schema",
      args: ["--no-data", "--skip-triggers", "shop", "customers", "orders"],
    });
    expect(commands.at(-1)).toEqual({
      what: "triggers",
      args: ["--no-data", "--no-create-info", "--triggers", "shop", "customers", "orders"],
    });
    expect(commands).toHaveLength(4);
  });

  it("copies nothing for mode empty without filters", () => {
    expect(mysqlStreamCommands(planCopy({ mode: "empty" }), "shop")).toEqual([]);
  });

  it("refuses a filter on another database, naming the filter", () => {
    const plan = planCopy({
      mode: "schema",
      filters: [
        { table: "orders", where: "id = 1" },
        { table: "billing.invoices", where: "id = 1" },
      ],
    });
    let error: unknown;
    try {
      mysqlStreamCommands(plan, "shop");
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(MysqlBranchError);
    expect(error).toMatchObject({ terminal: true, reason: "FilterInvalid" });
    expect((error as Error).message).toMatch(
      /^spec\.copy\.filters\[1\]\.table: billing\.invoices names database billing/,
    );
  });
});
