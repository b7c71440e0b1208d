// The MySQL/MariaDB commands of each copy step (copy-plan.ts), as mariadb-dump content
// arguments (the provisioner adds the connection). The sections map onto what a MySQL dump
// can split: pre-data is tables, views, routines and events without rows; post-data is
// the triggers, created after the rows so copying rows never fires them (indexes and
// foreign keys are part of CREATE TABLE, and the dump loads rows with foreign key checks
// off). `all` is one dump of everything, so every row comes from one snapshot of the
// source and each table's triggers still follow its rows.
import type { CopyStep, TableName } from "../copy-plan.js";
import { MysqlBranchError } from "./mysql-branch-error.js";

// A consistent read of InnoDB tables without locking the source against writes; no
// tablespace statements (they need PROCESS); BLOBs as hex so bytes survive any client
// character set; no comments or dates, so dumps of one source compare equal.
export const DUMP_COMMON = ["--single-transaction", "--no-tablespaces", "--hex-blob", "--skip-comments"];

export type MysqlDumpCommand = {
  /** What the step copies, for messages and logs: `schema`, `rows of orders`, `triggers`, … */
  what: string;
  /** mariadb-dump arguments after the connection: options, then the database and its tables. */
  args: string[];
};

/**
 * A filter's table in the source database. In MySQL a schema is a database, so
 * `schema.table` must name the source database itself.
 */
export function mysqlTableName(table: TableName, database: string, field: string): string {
  if (table.schema !== undefined && table.schema !== database)
    throw new MysqlBranchError(
      "FilterInvalid",
      `${field}.table: ${table.schema}.${table.name} names database ${table.schema}, but the source ` +
        `database is ${database}: write ${table.name} (a branch copies one database)`,
      "terminal",
    );
  if (table.name.length > 64)
    throw new MysqlBranchError(
      "FilterInvalid",
      `${field}.table: ${table.name} is longer than 64 characters, the MySQL limit`,
      "terminal",
    );
  return table.name;
}

/** Checks every filter's table against `database` first, so an error names the filter at fault. */
export function checkPlanTables(plan: readonly CopyStep[], database: string): void {
  for (const s of plan) if (s.kind === "copyRows") mysqlTableName(s.table, database, s.field);
}

function tableList(tables: "all" | readonly TableName[], database: string): string[] {
  return tables === "all" ? [] : tables.map((t) => mysqlTableName(t, database, "spec.copy.filters[]"));
}

/** The dump of one step, or undefined for steps that are not a dump (`createDatabase`). */
export function mysqlDumpCommand(step: CopyStep, database: string): MysqlDumpCommand | undefined {
  switch (step.kind) {
    case "createDatabase":
      return undefined;
    case "copySchema": {
      const tables = tableList(step.tables, database);
      // Routines and events belong to the database, not a table: copied with every table only.
      const whole = step.tables === "all" ? ["--routines", "--events"] : [];
      return step.section === "pre-data"
        ? { what: "schema", args: ["--no-data", "--skip-triggers", ...whole, database, ...tables] }
        : {
            what: "triggers",
            args: ["--no-data", "--no-create-info", "--triggers", database, ...tables],
          };
    }
    case "copyAllRows":
      return { what: "rows", args: ["--no-create-info", "--skip-triggers", database] };
    case "copyRows": {
      const table = mysqlTableName(step.table, database, step.field);
      // Parenthesised so a condition with OR reads as one condition of the dump's WHERE.
      return {
        what: `rows of ${table} where ${step.where}`,
        args: ["--no-create-info", "--skip-triggers", `--where=(${step.where})`, database, table],
      };
    }
  }
}

/** True for the plan of mode `all`: schema, every row, triggers of every table. */
export function copiesEverything(plan: readonly CopyStep[]): boolean {
  return plan.some((s) => s.kind === "copyAllRows");
}

/** The dumps that stream `plan` into a branch on another server, in order. */
export function mysqlStreamCommands(plan: readonly CopyStep[], database: string): MysqlDumpCommand[] {
  checkPlanTables(plan, database);
  if (copiesEverything(plan))
    return [{ what: "everything", args: ["--routines", "--events", "--triggers", database] }];
  return plan.flatMap((s) => mysqlDumpCommand(s, database) ?? []);
}
