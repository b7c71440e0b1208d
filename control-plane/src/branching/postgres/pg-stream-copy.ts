// A branch streamed from a source on another server (or from a busy source on this one):
// the copy plan's steps run in order, each a pipe of two client processes — `pg_dump`
// (plain format) into `psql`, or the source's `COPY (SELECT …) TO STDOUT` into the branch's
// `COPY … FROM STDIN` for filtered rows — with nothing staged on disk. psql connects to
// the branch as the branch user, so every object it makes is the branch user's. All
// steps read one snapshot of the source, exported by a transaction held open meanwhile,
// so rows of related tables agree. pg_dump refuses a server newer than itself: its
// version is compared with the source's before anything is made.
import pg from "pg";
import type { Logger } from "pino";
import type { CopyStep } from "../copy-plan.js";
import {
  conninfo,
  majorOfVersionNum,
  showMajor,
  ToolPipeError,
  type PgClientTools,
  type ToolRun,
} from "./pg-client-tools.js";
import { pgQualifiedTable, pgQuoteIdentifier, pgStreamSteps } from "./pg-copy-commands.js";
import type { FilterStep, SourceFacts } from "./pg-source-check.js";
import { PgBranchError, type PgSession, type PgTarget } from "./pg-session.js";

/** Refuses (terminal) a pg_dump older than the source server, naming both and the fix. */
export async function checkPgDump(tools: PgClientTools, facts: SourceFacts, what: string): Promise<void> {
  const [dump] = await Promise.all([tools.major("pg_dump"), tools.major("psql")]);
  const source = majorOfVersionNum(facts.versionNum);
  if (dump >= source) return;
  throw new PgBranchError(
    "PgDumpTooOld",
    `pg_dump ${showMajor(dump)} (${tools.where()}) cannot dump ${what}, a PostgreSQL ${showMajor(source)} server: ` +
      `pg_dump must be at least the source's major version. Put a PostgreSQL ${showMajor(source)} or newer client ` +
      "(pg_dump and psql) in the control plane's image, or point the server provisioner's pgBinDir option at one",
    "terminal",
  );
}

/**
 * Opens a repeatable-read transaction on the source and exports its snapshot for the
 * steps to share; undefined when the source cannot (then each step reads its own).
 */
export async function exportSnapshot(
  source: PgSession,
  logger: Pick<Logger, "warn">,
): Promise<string | undefined> {
  try {
    await source.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    const [row] = await source.query<{ id: string }>("SELECT pg_export_snapshot() AS id");
    if (row && /^[0-9A-Fa-f-]+$/.test(row.id)) return row.id;
  } catch (err) {
    if (source.aborted) throw err;
    logger.warn({ err: String(err) }, "the source cannot export a snapshot; each copy step reads its own");
    await source.query("ROLLBACK").catch(() => undefined);
  }
  return undefined;
}

/**
 * An empty branch database owned by `owner`, from template0 with the source's encoding
 * and locale (the server's default locale when it lacks the source's).
 */
export async function createEmptyBranch(
  admin: PgSession,
  names: { branch: string; owner: string },
  facts: SourceFacts,
  logger: Pick<Logger, "warn">,
): Promise<void> {
  const base =
    `CREATE DATABASE ${pgQuoteIdentifier(names.branch)} OWNER ${pgQuoteIdentifier(names.owner)} ` +
    `TEMPLATE template0 ENCODING ${pg.escapeLiteral(facts.encoding)}`;
  try {
    await admin.query(
      `${base} LC_COLLATE ${pg.escapeLiteral(facts.collate)} LC_CTYPE ${pg.escapeLiteral(facts.ctype)}`,
    );
  } catch (err) {
    if (admin.aborted || !/locale|collation|LC_/i.test(String(err))) throw err;
    logger.warn(
      { collate: facts.collate, ctype: facts.ctype, err: String(err) },
      "the branch server lacks the source's locale; the branch uses the server's default",
    );
    await admin.query(base);
  }
}

export interface StreamCopyInput {
  tools: PgClientTools;
  /** The source as its user (password included: it goes to the processes' environment). */
  source: PgTarget;
  /** The branch database as the branch user. */
  branch: PgTarget;
  plan: readonly CopyStep[];
  snapshot: string | undefined;
  /** Names the source in messages (never the password). */
  what: string;
  signal: AbortSignal;
}

/** Runs every step of the plan after createDatabase, in order. */
export async function streamPlan(input: StreamCopyInput): Promise<void> {
  const { tools, source, branch, snapshot, signal } = input;
  const secrets = [source.password, branch.password];
  const psql = (target: PgTarget, commands: string[]): ToolRun => ({
    tool: "psql",
    args: [
      "--no-psqlrc",
      "--quiet",
      "--no-password",
      "--set=ON_ERROR_STOP=1",
      `--dbname=${conninfo(target)}`,
      ...commands.flatMap((c) => ["--command", c]),
    ],
    password: target.password,
  });
  for (const { step, command } of pgStreamSteps(input.plan)) {
    if (command.tool === "none") continue;
    const [producer, consumer] =
      command.tool === "pg_dump"
        ? [
            {
              tool: "pg_dump" as const,
              args: [
                "--format=plain",
                "--no-password",
                // The source's tablespaces and security label providers are not the branch server's.
                "--no-tablespaces",
                "--no-security-labels",
                `--dbname=${conninfo(source)}`,
                ...(snapshot === undefined ? [] : [`--snapshot=${snapshot}`]),
                ...command.args,
              ],
              password: source.password,
            },
            psql(branch, []),
          ]
        : [
            psql(source, [
              ...(snapshot === undefined
                ? []
                : [
                    "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
                    `SET TRANSACTION SNAPSHOT '${snapshot}'`,
                  ]),
              command.source,
            ]),
            psql(branch, [command.branch]),
          ];
    try {
      await tools.pipe(producer, consumer, signal, secrets);
    } catch (err) {
      if (!(err instanceof ToolPipeError)) throw err;
      throw stepError(step, err, input.what);
    }
  }
}

function describeStep(step: CopyStep): string {
  switch (step.kind) {
    case "copySchema": {
      const which = step.tables === "all" ? "every table" : step.tables.map(pgQualifiedTable).join(", ");
      return step.section === "pre-data"
        ? `the schema of ${which}`
        : `the indexes, constraints and triggers of ${which}`;
    }
    case "copyAllRows":
      return "every table and row";
    case "copyRows":
      return `the rows of ${step.field} (${pgQualifiedTable(step.table)})`;
    case "createDatabase":
      return "the database";
  }
}

/**
 * What a failed pipe means. Terminal: a tool that cannot start, a statement the branch
 * rejects (psql exit 3: a foreign key of rows not copied, an extension the server lacks),
 * a filter failing on the source, pg_dump refused permission. Otherwise (a lost
 * connection, psql exit 2) retried.
 */
function stepError(step: CopyStep, err: ToolPipeError, what: string): PgBranchError {
  const { status } = err.failed;
  const copying = `copying ${describeStep(step)} from ${what} failed`;
  if (typeof status === "string" && status.startsWith("E"))
    return new PgBranchError("ClientToolMissing", `${copying}: ${err.message}`, "terminal");
  const onSource = err.side === "producer";
  if (onSource) {
    const refused = /permission denied|no matching|does not exist|version mismatch/i.test(err.message);
    const filterFailed = step.kind === "copyRows" && status === 3;
    return new PgBranchError(
      filterFailed ? "FilterRejected" : refused ? "SourceNotReadable" : "CopyFailed",
      `${copying} on the source: ${err.message}`,
      refused || filterFailed ? "terminal" : "transient",
    );
  }
  const rejected = status === 3;
  const hint =
    rejected && /foreign key/i.test(err.message)
      ? " (copied rows reference rows that were not copied: filter the referenced tables too, spec.copy.filters)"
      : "";
  return new PgBranchError(
    rejected ? "CopyRejected" : "CopyFailed",
    `${copying} on the branch: ${err.message}${hint}`,
    rejected ? "terminal" : "transient",
  );
}

/**
 * The sequences owned by a column (serial or identity) of the tables `$1` (`text[]` of
 * qualified names): `seq`, `tbl` and `col` quoted for SQL, whether it ascends, and the bound a
 * `setval` must not pass. Shared with the pod provisioner's seed script (pg-pod-seed.ts).
 */
export const OWNED_SEQUENCES_SQL = `SELECT format('%I.%I', sn.nspname, s.relname) AS seq, format('%I.%I', tn.nspname, t.relname) AS tbl,
            quote_ident(a.attname) AS col, ps.seqincrement > 0 AS ascending,
            (CASE WHEN ps.seqincrement > 0 THEN ps.seqmin ELSE ps.seqmax END)::text AS bound
       FROM pg_depend d
       JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
       JOIN pg_namespace sn ON sn.oid = s.relnamespace
       JOIN pg_sequence ps ON ps.seqrelid = s.oid
       JOIN pg_class t ON t.oid = d.refobjid
       JOIN pg_namespace tn ON tn.oid = t.relnamespace
       JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = d.refobjsubid
      WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
        AND d.deptype IN ('a', 'i') AND t.oid = ANY (SELECT to_regclass(x)::oid FROM unnest($1::text[]) x)`;

/**
 * After filtered rows (modes `empty` and `schema`, where sequence positions are not
 * copied): moves each sequence owned by a filtered table's column (serial or identity)
 * past the largest value copied (the smallest, for a descending one). On a session
 * connected to the branch.
 */
export async function moveSequencesPastRows(
  branch: PgSession,
  filters: readonly FilterStep[],
): Promise<number> {
  if (filters.length === 0) return 0;
  const sequences = await branch.query<{
    seq: string;
    tbl: string;
    col: string;
    ascending: boolean;
    bound: string;
  }>(OWNED_SEQUENCES_SQL, [filters.map((f) => pgQualifiedTable(f.table))]);
  if (sequences.length === 0) return 0;
  const statements = sequences.map(({ seq, tbl, col, ascending, bound }) => {
    const [agg, cmp] = ascending ? ["max", ">="] : ["min", "<="];
    return (
      `SELECT pg_catalog.setval(${pg.escapeLiteral(seq)}::regclass, v) ` +
      `FROM (SELECT ${agg}(${col}) AS v FROM ${tbl}) x WHERE v IS NOT NULL AND v ${cmp} ${bound}`
    );
  });
  await branch.query(statements.join(";\n"));
  return sequences.length;
}
