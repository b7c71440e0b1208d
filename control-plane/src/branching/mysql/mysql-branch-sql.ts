// The admin's statements on the branch server: a branch's database, its user, the
// completion marker, and dropping all of it. Names reaching these statements are
// generated branch names (`sy_…`, `[a-z0-9_]`), checked by the caller; they are quoted
// anyway. The completion marker is the database's comment (MariaDB 10.5+,
// `information_schema.SCHEMATA.SCHEMA_COMMENT`): invisible to the application — a marker
// table would show up in its schema, its ORM's migrations and its dumps — and it goes with
// the database. It is written last, so a database without it is half-made.
import type { Connection, RowDataPacket } from "mysql2/promise";

/** `name` quoted for MySQL: backticks, with an embedded backtick doubled. */
export function mysqlQuoteIdentifier(name: string): string {
  return `\`${name.replaceAll("`", "``")}\``;
}

/**
 * A database name for `GRANT … ON <db>.*`, where `_` and `%` are wildcards: escaped, so the
 * grant covers this database only (`sy_a_b` would also match `syXaYb`).
 */
export function grantDatabase(name: string): string {
  return mysqlQuoteIdentifier(name.replace(/[\\_%]/g, (c) => `\\${c}`));
}

/** `'user'@'%'`: a branch user may connect from anywhere its password reaches the server. */
export function branchAccount(user: string): string {
  return `'${user.replace(/\\/g, "\\\\").replace(/'/g, "''")}'@'%'`;
}

/** A string literal (values only: generated passwords, comments). */
export function sqlString(text: string): string {
  return `'${text.replace(/\\/g, "\\\\").replace(/'/g, "''")}'`;
}

/** How a branch's rows were copied: by the server itself, or streamed from another server. */
export type MysqlCopyMethod = "template" | "stream";

/** The database comment while copying, and once complete: names the CR for whoever lists databases. */
export function branchComment(
  cr: { namespace: string; name: string },
  state: "copying" | { complete: MysqlCopyMethod },
): string {
  const of = `switchyard branch of ${cr.namespace}/${cr.name}`;
  return state === "copying" ? `${of}: copying` : `${of}: complete; method=${state.complete}`;
}

const COMPLETE = /: complete; method=(template|stream)$/;

export type BranchState = { state: "absent" | "half-made" } | { state: "complete"; method: MysqlCopyMethod };

/** Whether the branch database exists, and whether (and how) its copy completed. */
export async function branchState(admin: Connection, database: string): Promise<BranchState> {
  const [rows] = await admin.query<RowDataPacket[]>(
    "SELECT SCHEMA_COMMENT AS c FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
    [database],
  );
  if (rows.length === 0) return { state: "absent" };
  const complete = COMPLETE.exec(String(rows[0]!.c ?? ""));
  return complete ? { state: "complete", method: complete[1] as MysqlCopyMethod } : { state: "half-made" };
}

/** The database, with the source's character set and collation, marked as being copied. */
export async function createBranchDatabase(
  admin: Connection,
  database: string,
  charset: { characterSet: string; collation: string },
  cr: { namespace: string; name: string },
): Promise<void> {
  await admin.query(
    `CREATE DATABASE ${mysqlQuoteIdentifier(database)} CHARACTER SET ${mysqlQuoteIdentifier(charset.characterSet)} ` +
      `COLLATE ${mysqlQuoteIdentifier(charset.collation)} COMMENT ${sqlString(branchComment(cr, "copying"))}`,
  );
}

/** The branch user with its password and every privilege on the branch database, and nothing else. */
export async function ensureBranchUser(
  admin: Connection,
  database: string,
  user: string,
  password: string,
): Promise<void> {
  const account = branchAccount(user);
  await admin.query(`CREATE USER IF NOT EXISTS ${account} IDENTIFIED BY ${sqlString(password)}`);
  // For a user that existed: the password recorded for the branch is the one that works.
  await admin.query(`ALTER USER ${account} IDENTIFIED BY ${sqlString(password)}`);
  await admin.query(`GRANT ALL PRIVILEGES ON ${grantDatabase(database)}.* TO ${account}`);
}

/** Writes the completion marker: the last step of making a branch. */
export async function markComplete(
  admin: Connection,
  database: string,
  cr: { namespace: string; name: string },
  method: MysqlCopyMethod,
): Promise<void> {
  await admin.query(
    `ALTER DATABASE ${mysqlQuoteIdentifier(database)} COMMENT ${sqlString(branchComment(cr, { complete: method }))}`,
  );
}

// ER_NO_SUCH_THREAD: the connection ended between listing and killing it.
const NO_SUCH_THREAD = 1094;

/**
 * Drops the user first (no new logins), ends its connections (their open transactions
 * would hold the database's metadata lock), then drops the database.
 */
export async function dropBranch(admin: Connection, database: string, user: string): Promise<void> {
  await admin.query(`DROP USER IF EXISTS ${branchAccount(user)}`);
  const [sessions] = await admin.query<RowDataPacket[]>(
    "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE USER = ?",
    [user],
  );
  for (const s of sessions) {
    try {
      await admin.query(`KILL CONNECTION ${Number(s.id)}`);
    } catch (err) {
      if ((err as { errno?: unknown }).errno !== NO_SUCH_THREAD) throw err;
    }
  }
  await admin.query(`DROP DATABASE IF EXISTS ${mysqlQuoteIdentifier(database)}`);
}
