// Rows of a branch on the source's own server: the server copies them itself, one
// `INSERT INTO branch.t (cols) SELECT cols FROM source.t [WHERE (…)]` per table — no row
// passes through the control plane. Columns are listed (generated columns left out: the
// branch computes them) from the branch's copy of the table. The session reads the source
// at READ COMMITTED, where InnoDB's INSERT … SELECT reads a snapshot instead of
// share-locking the source rows, so the source's writers are never blocked; each table is
// consistent in itself (not across tables, as one mariadb-dump would be). Under statement
// binary logging READ COMMITTED cannot log the insert, so the copy falls back to the
// default isolation and says it locks. An abort kills the running statement on the server.
import mysql, { type Connection, type RowDataPacket } from "mysql2/promise";
import type { Logger } from "pino";
import { fromDriverError } from "./mysql-branch-error.js";
import { mysqlQuoteIdentifier } from "./mysql-branch-sql.js";
import { driverOptions, type MysqlEndpoint } from "./mysql-connection-options.js";
import { abortReason } from "./mysql-dump-pipe.js";

export interface RowCopy {
  table: string;
  /** undefined: every row. */
  where: string | undefined;
  /** The filter's spec path, for messages. */
  field?: string;
}

async function insertColumns(admin: Connection, database: string, table: string): Promise<string[]> {
  const [rows] = await admin.query<RowDataPacket[]>(
    "SELECT COLUMN_NAME AS c FROM information_schema.COLUMNS " +
      "WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND IS_GENERATED = 'NEVER' ORDER BY ORDINAL_POSITION",
    [database, table],
  );
  return rows.map((r) => mysqlQuoteIdentifier(String(r.c)));
}

/** The statement copying `copy` from `source` into `branch`, given the columns to fill. */
export function rowCopyStatement(source: string, branch: string, copy: RowCopy, columns: string[]): string {
  const t = mysqlQuoteIdentifier(copy.table);
  const list = columns.join(", ");
  const where = copy.where === undefined ? "" : ` WHERE (${copy.where})`;
  return (
    `INSERT INTO ${mysqlQuoteIdentifier(branch)}.${t} (${list}) ` +
    `SELECT ${list} FROM ${mysqlQuoteIdentifier(source)}.${t}${where}`
  );
}

/** Copies `copies` from `source` into `branch` on the admin's server, in order. */
export async function copyRowsOnServer(
  admin: MysqlEndpoint,
  source: string,
  branch: string,
  copies: readonly RowCopy[],
  signal: AbortSignal,
  logger: Pick<Logger, "warn" | "debug">,
): Promise<void> {
  const secrets = [admin.password];
  // The source as the default database: a filter names its tables as the source's own.
  const c = await mysql.createConnection(driverOptions(admin, source)).catch((err: unknown) => {
    throw fromDriverError(err, "connecting to the branch server to copy rows", secrets, "branch");
  });
  // mysql2 cannot cancel a statement: a second connection kills it on the server.
  const onAbort = () => {
    void (async () => {
      const killer = await mysql.createConnection(driverOptions(admin));
      try {
        await killer.query(`KILL QUERY ${c.threadId}`);
      } finally {
        killer.destroy();
        c.destroy();
      }
    })().catch(() => c.destroy());
  };
  signal.addEventListener("abort", onAbort, { once: true });
  let doing = "preparing the row copy";
  let current: RowCopy | undefined;
  try {
    // As mariadb-dump's own loads do: no foreign key work, zero ids kept, timestamps in UTC.
    await c.query(
      "SET SESSION foreign_key_checks = 0, unique_checks = 0, sql_mode = 'NO_AUTO_VALUE_ON_ZERO'",
    );
    await c.query("SET SESSION time_zone = '+00:00'");
    const [log] = await c.query<RowDataPacket[]>("SELECT @@log_bin AS bin, @@binlog_format AS format");
    if (Number(log[0]!.bin) === 1 && String(log[0]!.format) === "STATEMENT")
      logger.warn(
        { branch },
        "binlog_format is STATEMENT: the same-server row copy share-locks the source rows it reads",
      );
    else await c.query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
    for (const copy of copies) {
      if (signal.aborted) break;
      current = copy;
      doing = `copying rows of ${source}.${copy.table} into ${branch}`;
      const columns = await insertColumns(c, branch, copy.table);
      if (columns.length === 0) continue;
      const started = Date.now();
      const [result] = await c.query(rowCopyStatement(source, branch, copy, columns));
      logger.debug(
        {
          branch,
          table: copy.table,
          rows: (result as { affectedRows?: number }).affectedRows,
          ms: Date.now() - started,
        },
        "copied rows on the server",
      );
    }
  } catch (err) {
    if (signal.aborted) throw abortReason(signal);
    const field = current?.field;
    throw fromDriverError(err, field === undefined ? doing : `${field}: ${doing}`, secrets, "branch");
  } finally {
    signal.removeEventListener("abort", onAbort);
    c.destroy();
  }
  if (signal.aborted) throw abortReason(signal);
}
