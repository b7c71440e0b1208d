// A branch of a source database that lives on the branch server itself: the server's own
// copy, `CREATE DATABASE <branch> TEMPLATE <source>` — on PostgreSQL 18 with
// `STRATEGY = FILE_COPY` and `file_copy_method = clone` (a user-settable parameter, so
// set for this session only), which shares the files' blocks on a copy-on-write
// filesystem: a multi-GB database in a fraction of a second. Then the copy is trimmed to
// the copy mode in one transaction:
// - `all`: nothing;
// - `schema`: every table not filtered emptied in ONE `TRUNCATE ONLY … RESTART IDENTITY`
//   (so foreign keys among them never block it, and their owned sequences start over as in
//   a stream copy); a filtered table keeps the rows its `where` is true for
//   (`DELETE … WHERE (<where>) IS NOT TRUE`, so rows it is NULL for go, as a stream copy's
//   `WHERE` leaves them out), referencing tables before the tables they reference;
// - `empty`: every table not filtered dropped (CASCADE: views on them and foreign keys to
//   them go too); other objects — functions, types, sequences no dropped table owns —
//   stay.
// A template copy cannot start while anyone else is connected to the source (SQLSTATE
// 55006); the caller then streams instead: nobody's connection is ever ended for a branch.
import type { Logger } from "pino";
import type { CopyMode } from "../../../../proto/api/v1alpha1/index.js";
import { pgQualifiedTable, pgQuoteIdentifier } from "./pg-copy-commands.js";
import {
  describePgError,
  errorCode,
  isRejectedStatement,
  PgBranchError,
  type PgSession,
} from "./pg-session.js";
import type { FilterStep } from "./pg-source-check.js";

/** What a template copy came to: made (by clone or the default strategy), or why not. */
export type TemplateOutcome = { made: "clone" | "template" } | { fallback: string };

/** Per provisioner: why the server refused a clone, once it has (not asked again). */
export interface CloneState {
  refused: string | undefined;
}

const IN_USE = "55006";
const NOT_PERMITTED = "42501";

/**
 * Creates `branch` (owned by `owner`) as a copy of `source` on the admin's server. Falls
 * back (returns the reason) when the source is in use or the admin may not copy it.
 */
export async function createFromTemplate(
  admin: PgSession,
  names: { source: string; branch: string; owner: string },
  serverVersionNum: number,
  clone: CloneState,
  logger: Pick<Logger, "warn">,
): Promise<TemplateOutcome> {
  const create = (strategy: string) =>
    admin.query(
      `CREATE DATABASE ${pgQuoteIdentifier(names.branch)} OWNER ${pgQuoteIdentifier(names.owner)} ` +
        `TEMPLATE ${pgQuoteIdentifier(names.source)}${strategy}`,
    );
  const fallbackOf = (err: unknown): TemplateOutcome | undefined => {
    const code = errorCode(err);
    if (code === IN_USE) return { fallback: `other sessions are connected to ${names.source}` };
    if (code === NOT_PERMITTED)
      return { fallback: `the admin may not copy ${names.source} (${describePgError(err, [])})` };
    return undefined;
  };
  if (serverVersionNum >= 180_000 && clone.refused === undefined) {
    try {
      await admin.query("SET file_copy_method = clone");
      await create(" STRATEGY = FILE_COPY");
      return { made: "clone" };
    } catch (err) {
      const fallback = fallbackOf(err);
      if (fallback) return fallback;
      if (errorCode(err) === "3D000") throw sourceMissing(names.source);
      clone.refused = describePgError(err, []);
      logger.warn(
        { refused: clone.refused },
        "the branch server refused a clone (file_copy_method = clone); template copies use its default strategy from now on",
      );
    } finally {
      await admin.query("RESET file_copy_method").catch(() => undefined);
    }
  }
  try {
    await create("");
    return { made: "template" };
  } catch (err) {
    const fallback = fallbackOf(err);
    if (fallback) return fallback;
    if (errorCode(err) === "3D000") throw sourceMissing(names.source);
    throw err;
  }
}

function sourceMissing(source: string): PgBranchError {
  return new PgBranchError(
    "SourceMissing",
    `database ${source} does not exist on the branch server: check the source URL's database`,
    "terminal",
  );
}

interface TableRow {
  name: string;
  relkind: string;
  keeps_rows: boolean;
  holds_filtered: boolean;
}

/**
 * On a session connected to the branch, inside a transaction: trims the template copy to
 * `mode` (see the module comment). `filters` are the plan's copyRows steps.
 */
export async function trimToMode(
  branch: PgSession,
  mode: CopyMode,
  filters: readonly FilterStep[],
): Promise<void> {
  if (mode === "all") return;
  const filtered: string[] = [];
  for (const f of filters) {
    const [row] = await branch.query<{ oid: string | null }>("SELECT to_regclass($1)::oid AS oid", [
      pgQualifiedTable(f.table),
    ]);
    if (row?.oid == null)
      throw new PgBranchError(
        "TableMissing",
        `${f.field}.table: table ${pgQualifiedTable(f.table)} does not exist in the source database`,
        "terminal",
      );
    filtered.push(row.oid);
  }
  // Partitions and inheritance children of a filtered table keep their matching rows (its
  // DELETE reaches them); its ancestors stay (emptied) so it keeps its place.
  const tables = await branch.query<TableRow>(
    `WITH RECURSIVE
       filtered(oid) AS (SELECT unnest($1::oid[])),
       down(oid) AS (SELECT oid FROM filtered
                     UNION SELECT i.inhrelid FROM pg_inherits i JOIN down d ON i.inhparent = d.oid),
       up(oid) AS (SELECT oid FROM filtered
                   UNION SELECT i.inhparent FROM pg_inherits i JOIN up u ON i.inhrelid = u.oid)
     SELECT format('%I.%I', n.nspname, c.relname) AS name, c.relkind,
            c.oid IN (SELECT oid FROM down) AS keeps_rows, c.oid IN (SELECT oid FROM up) AS holds_filtered
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind IN ('r', 'p') AND c.oid >= 16384 AND c.relpersistence <> 't'
        AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = 'pg_class'::regclass
                          AND e.objid = c.oid AND e.deptype = 'e')
      ORDER BY 1`,
    [filtered],
  );
  const dropped = mode === "empty" ? tables.filter((t) => !t.keeps_rows && !t.holds_filtered) : [];
  const emptied = tables.filter((t) => t.relkind === "r" && !t.keeps_rows && !dropped.includes(t));
  if (dropped.length > 0) await branch.query(`DROP TABLE ${dropped.map((t) => t.name).join(", ")} CASCADE`);
  if (emptied.length > 0) {
    try {
      await branch.query(`TRUNCATE ${emptied.map((t) => `ONLY ${t.name}`).join(", ")} RESTART IDENTITY`);
    } catch (err) {
      if (errorCode(err) !== "0A000") throw err;
      throw new PgBranchError(
        "FilterIncomplete",
        `a filtered table references a table whose rows are not copied (${describePgError(err, [])}): ` +
          "filter the referenced table too (spec.copy.filters)",
        "terminal",
      );
    }
  }
  for (const f of await childrenFirst(branch, filters, filtered)) {
    try {
      await branch.query(`DELETE FROM ${pgQualifiedTable(f.table)} WHERE (${f.where}) IS NOT TRUE`);
    } catch (err) {
      if (branch.aborted) throw err;
      throw new PgBranchError(
        "FilterRejected",
        `${f.field}: the rows of ${pgQualifiedTable(f.table)} could not be kept: ${describePgError(err, [])}` +
          (errorCode(err) === "23503"
            ? " (rows kept elsewhere reference rows this filter leaves out: widen it)"
            : ""),
        isRejectedStatement(err) ? "terminal" : "transient",
      );
    }
  }
}

/** The filters ordered so a table referencing another filtered table comes before it. */
async function childrenFirst(
  branch: PgSession,
  filters: readonly FilterStep[],
  oids: readonly string[],
): Promise<FilterStep[]> {
  const edges = await branch.query<{ child: string; parent: string }>(
    `SELECT conrelid::oid AS child, confrelid::oid AS parent FROM pg_constraint
      WHERE contype = 'f' AND conrelid = ANY($1::oid[]) AND confrelid = ANY($1::oid[]) AND conrelid <> confrelid`,
    [oids],
  );
  const order: FilterStep[] = [];
  const left = new Set(oids.map((_, i) => i));
  while (left.size > 0) {
    // Next: a table no remaining table references; in a cycle, the first remaining one.
    const ready = [...left].find(
      (i) =>
        !edges.some((e) => e.parent === oids[i] && [...left].some((j) => j !== i && oids[j] === e.child)),
    );
    const next = ready ?? [...left][0]!;
    left.delete(next);
    order.push(filters[next]!);
  }
  return order;
}
