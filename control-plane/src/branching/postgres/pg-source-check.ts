// What a branch may copy from its source, checked with the source's own credentials
// before anything is made — on both paths. A template copy is made by the branch server's
// admin, who could copy any database there: the source user must be able to log in and
// read every row the branch receives, or there is no branch. The same checks give a
// stream copy its errors early and precisely: a missing filtered table, a filter the
// source rejects, a table the user may not read — all terminal, each naming the spec field.
import type { CopyMode } from "../../../../proto/api/v1alpha1/index.js";
import type { CopyStep } from "../copy-plan.js";
import { pgQualifiedTable } from "./pg-copy-commands.js";
import { describePgError, isRejectedStatement, PgBranchError, type PgSession } from "./pg-session.js";

/** A row filter of the plan: the table, its `where`, and the spec field it came from. */
export type FilterStep = Extract<CopyStep, { kind: "copyRows" }>;

export interface SourceFacts {
  /** server_version_num, e.g. 180004. */
  versionNum: number;
  /** The source database's encoding and libc locale, for a branch made from template0. */
  encoding: string;
  collate: string;
  ctype: string;
}

// Tables whose rows a copy of every row reads, sequences whose positions it copies, and
// materialized views whose rows a template copy carries.
const UNREADABLE = `
  SELECT format('%I.%I', n.nspname, c.relname) AS name
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE c.relkind IN ('r', 'm', 'S') AND c.oid >= 16384 AND c.relpersistence <> 't'
     AND NOT has_table_privilege(c.oid, 'SELECT')
     AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = 'pg_class'::regclass
                       AND e.objid = c.oid AND e.deptype = 'e')
   ORDER BY 1 LIMIT 6`;

/**
 * On a session connected to the source as its user: the facts a copy needs, after checking
 * that every filtered table exists, is readable and accepts its `where`, and (mode `all`)
 * that every table is readable. `what` names the source in messages.
 */
export async function inspectSource(
  source: PgSession,
  mode: CopyMode,
  filters: readonly FilterStep[],
  what: string,
): Promise<SourceFacts> {
  const [facts] = await source.query<{
    version_num: number;
    encoding: string;
    collate: string;
    ctype: string;
  }>(
    `SELECT current_setting('server_version_num')::int AS version_num, pg_encoding_to_char(d.encoding) AS encoding,
            d.datcollate AS collate, d.datctype AS ctype
       FROM pg_database d WHERE d.datname = current_database()`,
  );
  if (facts === undefined)
    throw new PgBranchError("SourceMissing", `${what}: its database is not in pg_database`, "transient");
  for (const f of filters) {
    const table = pgQualifiedTable(f.table);
    const [row] = await source.query<{ exists: boolean; readable: boolean | null }>(
      `SELECT to_regclass($1) IS NOT NULL AS exists,
              CASE WHEN to_regclass($1) IS NOT NULL THEN has_table_privilege(to_regclass($1), 'SELECT') END AS readable`,
      [table],
    );
    if (!row?.exists)
      throw new PgBranchError(
        "TableMissing",
        `${f.field}.table: table ${table} does not exist in ${what}`,
        "terminal",
      );
    if (!row.readable)
      throw new PgBranchError(
        "SourceNotReadable",
        `${f.field}.table: the source user may not read ${table} in ${what}: grant it SELECT, or branch as a user who may`,
        "terminal",
      );
    try {
      // Planned, never run: the condition's syntax, columns and types, without reading a row.
      await source.query(`EXPLAIN SELECT * FROM ${table} WHERE (${f.where})`);
    } catch (err) {
      if (source.aborted) throw err;
      throw new PgBranchError(
        "FilterRejected",
        `${f.field}.where: rejected by ${what}: ${describePgError(err, [])}`,
        isRejectedStatement(err) ? "terminal" : "transient",
      );
    }
  }
  if (mode === "all") {
    const unreadable = await source.query<{ name: string }>(UNREADABLE);
    if (unreadable.length > 0) {
      const names = unreadable.slice(0, 5).map((r) => r.name);
      throw new PgBranchError(
        "SourceNotReadable",
        `spec.copy.mode all copies every row, but the source user may not read ${names.join(", ")}` +
          `${unreadable.length > 5 ? " and more" : ""} in ${what}: grant it SELECT, or use mode schema with filters`,
        "terminal",
      );
    }
  }
  return {
    versionNum: Number(facts.version_num),
    encoding: facts.encoding,
    collate: facts.collate,
    ctype: facts.ctype,
  };
}
