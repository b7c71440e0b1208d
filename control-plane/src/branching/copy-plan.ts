// What a provisioner copies from the source into a new branch, as ordered steps, from the
// CR's `spec.copy` (mode and row filters). The order is the one pg_restore uses to load
// fast and consistently: tables first (pre-data), then rows, then indexes, constraints and
// triggers (post-data), so rows load without per-row index or foreign-key work. Filtered
// rows cannot be expressed with pg_dump (`--table` takes no WHERE), so they are planned as
// `COPY (SELECT …) TO STDOUT` on the source streamed into `COPY … FROM STDIN` on the branch.
// Everything that reaches SQL is checked here, before any connection is made.
import {
  TABLE_NAME_PATTERN,
  type BranchCopy,
  type CopyMode,
  type TableFilter,
} from "../../../proto/api/v1alpha1/index.js";

export const COPY_PLAN_INVALID = "SWITCHYARD_BRANCH_COPY_INVALID";

/** A spec.copy the plan refuses; `field` is the spec path at fault, the message says the fix. */
export class CopyPlanError extends Error {
  readonly code = COPY_PLAN_INVALID;
  constructor(
    readonly field: string,
    readonly problem: string,
  ) {
    super(`${field}: ${problem}`);
    this.name = "CopyPlanError";
  }
}

/** A table as written in a filter: `table` or `schema.table`. */
export interface TableName {
  schema: string | undefined;
  name: string;
}

/** `pre-data`: tables, types, sequences; `post-data`: indexes, constraints, triggers. */
export type SchemaSection = "pre-data" | "post-data";

export type CopyStep =
  /** Create the branch database and its owner (the provisioner's own statements). */
  | { kind: "createDatabase" }
  /** One schema section of every table (`tables: "all"`) or of the filtered tables only. */
  | { kind: "copySchema"; section: SchemaSection; tables: "all" | readonly TableName[] }
  /** Every row of every table. */
  | { kind: "copyAllRows" }
  /** The rows of one table matching `where` (the filter's text, as written). */
  | { kind: "copyRows"; table: TableName; where: string; field: string };

// The CRD's pattern (proto/api/v1alpha1): plain identifiers, so quoting is uniform.
const TABLE_NAME = new RegExp(TABLE_NAME_PATTERN);
// Postgres truncates longer identifiers silently; refusing keeps the name the user meant.
const IDENTIFIER_MAX_LENGTH = 63;

/** Parses `table` or `schema.table`; `field` names the spec path in errors. */
export function parseTableName(text: string, field: string): TableName {
  const parts = text.split(".");
  const fix = "write `table` or `schema.table`: letters, digits, _ and $, starting with a letter or _";
  if (parts.length > 2)
    throw new CopyPlanError(field, `${JSON.stringify(text)} has more than one '.': ${fix}`);
  if (!TABLE_NAME.test(text))
    throw new CopyPlanError(field, `${JSON.stringify(text)} is not a table name: ${fix}`);
  for (const part of parts) {
    if (part.length > IDENTIFIER_MAX_LENGTH)
      throw new CopyPlanError(
        field,
        `${JSON.stringify(part)} is longer than ${IDENTIFIER_MAX_LENGTH} characters`,
      );
  }
  return parts.length === 2 ? { schema: parts[0], name: parts[1]! } : { schema: undefined, name: parts[0]! };
}

/**
 * Refuses a `where` that could end the statement or hide text: `;`, `--` and `/*`. The
 * condition is otherwise used as written (it comes from the user's own CR, which RBAC
 * authorised) and runs with the source's credentials, which the target already holds.
 */
export function checkWhere(where: string, field: string): string {
  if (where.trim() === "") throw new CopyPlanError(field, "is empty: give a condition, e.g. tenant_id = 42");
  for (const [seq, what] of [
    [";", "a ';' (one condition only, no further statements)"],
    ["--", "a '--' comment"],
    ["/*", "a '/*' comment"],
  ] as const) {
    const at = where.indexOf(seq);
    if (at >= 0) throw new CopyPlanError(field, `contains ${what} at character ${at + 1}: remove it`);
  }
  return where;
}

/**
 * The ordered steps for `copy` (mode defaults to `schema`, as the CRD does):
 * - `empty`: an empty database, plus each filtered table's schema and matching rows;
 * - `schema`: every table's schema without rows, plus the filtered rows;
 * - `all`: every table's schema and every row (filters are refused, as the CRD does).
 * Rows that reference rows not copied fail at post-data (their foreign key): filter the
 * referenced tables too.
 */
export function planCopy(copy: BranchCopy | undefined): CopyStep[] {
  const mode: CopyMode = copy?.mode ?? "schema";
  const filters: readonly TableFilter[] = copy?.filters ?? [];
  if (mode === "all" && filters.length > 0)
    throw new CopyPlanError(
      "spec.copy.filters",
      "is only allowed with spec.copy.mode empty or schema (all copies every row): remove the filters or change the mode",
    );
  const seen = new Map<string, string>();
  const rows = filters.map((f, i): Extract<CopyStep, { kind: "copyRows" }> => {
    const at = `spec.copy.filters[${i}]`;
    const table = parseTableName(f.table, `${at}.table`);
    const key = `${table.schema ?? ""}.${table.name}`;
    const first = seen.get(key);
    if (first !== undefined)
      throw new CopyPlanError(
        `${at}.table`,
        `${f.table} is filtered twice (also ${first}): join the conditions with OR`,
      );
    seen.set(key, `${at}.table`);
    return { kind: "copyRows", table, where: checkWhere(f.where, `${at}.where`), field: at };
  });
  if (mode === "all")
    return [
      { kind: "createDatabase" },
      { kind: "copySchema", section: "pre-data", tables: "all" },
      { kind: "copyAllRows" },
      { kind: "copySchema", section: "post-data", tables: "all" },
    ];
  const tables = mode === "schema" ? "all" : rows.map((r) => r.table);
  if (tables !== "all" && tables.length === 0) return [{ kind: "createDatabase" }];
  return [
    { kind: "createDatabase" },
    { kind: "copySchema", section: "pre-data", tables },
    ...rows,
    { kind: "copySchema", section: "post-data", tables },
  ];
}
