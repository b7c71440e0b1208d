// The Postgres commands of each copy step (copy-plan.ts): pg_dump's content arguments for
// schema and full-data steps (the provisioner adds the connection and output format), and
// the COPY statements of filtered rows. Identifiers are always double-quoted, so they
// match the catalog name exactly as written: `Orders` is not `orders`.
import type { CopyStep, TableName } from "../copy-plan.js";

export type PgCopyCommand =
  /** Nothing to run from the plan: the provisioner creates the database itself. */
  | { tool: "none" }
  /** pg_dump from the source, its output restored into the branch. */
  | { tool: "pg_dump"; args: string[] }
  /** `source` streams rows out of the source database, `branch` loads them. */
  | { tool: "copy"; source: string; branch: string };

// A branch gets its own owner and grants, and must never start replicating from or to
// the source's publications and subscriptions.
const DUMP_COMMON = ["--no-owner", "--no-privileges", "--no-publications", "--no-subscriptions"];

/** `"name"`, with embedded quotes doubled (copy-plan.ts admits none, but quoting never assumes). */
export function pgQuoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** `"schema"."table"` or `"table"`: valid both in SQL and as a pg_dump `--table` pattern. */
export function pgQualifiedTable(table: TableName): string {
  const name = pgQuoteIdentifier(table.name);
  return table.schema === undefined ? name : `${pgQuoteIdentifier(table.schema)}.${name}`;
}

/** The command of one step. Args are passed to the process as is (no shell). */
export function pgCopyCommand(step: CopyStep): PgCopyCommand {
  switch (step.kind) {
    case "createDatabase":
      return { tool: "none" };
    case "copySchema": {
      // In a pattern, double quotes make the name literal: no case folding, no wildcards.
      const tables = step.tables === "all" ? [] : step.tables.map((t) => `--table=${pgQualifiedTable(t)}`);
      return { tool: "pg_dump", args: [`--section=${step.section}`, ...DUMP_COMMON, ...tables] };
    }
    case "copyAllRows":
      return { tool: "pg_dump", args: ["--section=data", ...DUMP_COMMON] };
    case "copyRows": {
      const table = pgQualifiedTable(step.table);
      // Parenthesised so a condition with OR or AND reads as one condition of this WHERE.
      return {
        tool: "copy",
        source: `COPY (SELECT * FROM ${table} WHERE (${step.where})) TO STDOUT`,
        branch: `COPY ${table} FROM STDIN`,
      };
    }
  }
}

/**
 * The plan as the commands to run, in order, each with the step it stands for. Mode `all`
 * (pre-data, every row, post-data of every table) is one pg_dump of the whole database, as
 * `pg_dump | psql` does: one catalog read and one restore instead of three.
 */
export function pgStreamSteps(plan: readonly CopyStep[]): Array<{ step: CopyStep; command: PgCopyCommand }> {
  const everything = plan.find((s) => s.kind === "copyAllRows");
  if (everything !== undefined)
    return [{ step: everything, command: { tool: "pg_dump", args: [...DUMP_COMMON] } }];
  return plan
    .map((step) => ({ step, command: pgCopyCommand(step) }))
    .filter((c) => c.command.tool !== "none");
}
