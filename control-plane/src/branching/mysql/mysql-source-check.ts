// Before anything is made, the source is read with its own credentials: a wrong password,
// a database the user may not use, a missing table or a filter the server rejects fail
// here, terminally and with the field at fault, instead of halfway through a copy. Each
// filter runs as `SELECT 1 FROM t WHERE (…) LIMIT 0`: parsed and checked for privileges on
// every table it names, without reading a row. The same check on the tables a same-server
// copy reads (the server copies them as the admin) keeps that copy to what the source
// user itself may read.
import mysql, { type Connection, type RowDataPacket } from "mysql2/promise";
import type { CopyStep } from "../copy-plan.js";
import { fromDriverError } from "./mysql-branch-error.js";
import { mysqlQuoteIdentifier } from "./mysql-branch-sql.js";
import { mysqlTableName } from "./mysql-copy-commands.js";
import { driverOptions, type MysqlEndpoint } from "./mysql-connection-options.js";
import { abortReason } from "./mysql-dump-pipe.js";

export interface SourceFacts {
  characterSet: string;
  collation: string;
  /** The base tables of the source database the source user can see, when asked for. */
  tables?: string[];
}

async function check(c: Connection, sql: string, doing: string, secrets: (string | undefined)[]) {
  try {
    await c.query(sql);
  } catch (err) {
    throw fromDriverError(err, doing, secrets, "source");
  }
}

/**
 * Connects to `database` as the source user and checks the plan's filters (and, with
 * `listTables`, that every base table can be read); `described` names the source in
 * messages (a redacted URL).
 */
export async function checkSource(
  endpoint: MysqlEndpoint,
  database: string,
  plan: readonly CopyStep[],
  options: { listTables: boolean; described: string },
  signal: AbortSignal,
): Promise<SourceFacts> {
  const secrets = [endpoint.password];
  let c: Connection;
  try {
    c = await mysql.createConnection(driverOptions(endpoint, database));
  } catch (err) {
    throw fromDriverError(err, `connecting to the source ${options.described}`, secrets, "source");
  }
  const onAbort = () => c.destroy();
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    const [schema] = await c.query<RowDataPacket[]>(
      "SELECT DEFAULT_CHARACTER_SET_NAME AS cs, DEFAULT_COLLATION_NAME AS co " +
        "FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = DATABASE()",
    );
    const facts: SourceFacts = { characterSet: String(schema[0]!.cs), collation: String(schema[0]!.co) };
    for (const step of plan) {
      if (step.kind !== "copyRows") continue;
      const table = mysqlQuoteIdentifier(mysqlTableName(step.table, database, step.field));
      await check(
        c,
        `SELECT 1 FROM ${table} WHERE (${step.where}) LIMIT 0`,
        `${step.field}: the source ${options.described} refuses SELECT … FROM ${step.table.name} WHERE ${step.where}`,
        secrets,
      );
    }
    if (options.listTables) {
      const [rows] = await c.query<RowDataPacket[]>(
        "SELECT TABLE_NAME AS t FROM information_schema.TABLES " +
          "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
      );
      facts.tables = rows.map((r) => String(r.t));
      for (const t of facts.tables)
        await check(
          c,
          `SELECT 1 FROM ${mysqlQuoteIdentifier(t)} LIMIT 0`,
          `the source user cannot read table ${t} of ${options.described}`,
          secrets,
        );
    }
    return facts;
  } catch (err) {
    if (signal.aborted) throw abortReason(signal);
    throw fromDriverError(err, `reading the source ${options.described}`, secrets, "source");
  } finally {
    signal.removeEventListener("abort", onAbort);
    c.destroy();
  }
}
