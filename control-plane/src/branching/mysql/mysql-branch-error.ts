// Errors of the MySQL/MariaDB branch provisioner, and what decides whether retrying can
// help (branch-provisioner.ts: terminal errors are recorded as Failed, transient ones retried).
// Server errors arrive two ways — mysql2's error objects and the `ERROR 1045 …` /
// `Got error: 1045: …` lines of the command-line tools — and both are read by their error
// number. Messages never carry a password: every text that came from a server or a tool
// goes through `redact` with the passwords in play, and a mysql2 error is never chained
// as a cause (its `sql` property holds the statement, `IDENTIFIED BY '…'` included).
import { BranchError } from "../branch-error.js";

export const MYSQL_BRANCH_FAILED = "SWITCHYARD_BRANCH_MYSQL_FAILED";

/**
 * A step of making or dropping a MySQL/MariaDB branch failed; `reason` is the CR condition's
 * reason. Terminal when retrying cannot help (credentials, a missing table, a rejected filter).
 */
export class MysqlBranchError extends BranchError {
  readonly code = MYSQL_BRANCH_FAILED;
}

// Server error numbers that a retry cannot fix: the request itself (or a grant) is wrong.
const TERMINAL_ERRNOS: Record<number, string> = {
  1044: "SourceAccessDenied", // ER_DBACCESS_DENIED_ERROR: no access to the database
  1045: "SourceAccessDenied", // ER_ACCESS_DENIED_ERROR: bad user or password
  1049: "SourceDatabaseMissing", // ER_BAD_DB_ERROR
  1054: "FilterInvalid", // ER_BAD_FIELD_ERROR: unknown column in a where
  1064: "FilterInvalid", // ER_PARSE_ERROR
  1142: "SourceAccessDenied", // ER_TABLEACCESS_DENIED_ERROR
  1143: "SourceAccessDenied", // ER_COLUMNACCESS_DENIED_ERROR
  1146: "TableMissing", // ER_NO_SUCH_TABLE
  1227: "SourceAccessDenied", // ER_SPECIFIC_ACCESS_DENIED_ERROR
  1273: "CollationUnsupported", // ER_UNKNOWN_COLLATION: the branch server lacks the source's collation
  1305: "FilterInvalid", // ER_SP_DOES_NOT_EXIST: unknown function in a where
  1370: "SourceAccessDenied", // ER_PROCACCESS_DENIED_ERROR
  1582: "FilterInvalid", // ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT
  1698: "SourceAccessDenied", // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
};

/** The reason for a server error number that retrying cannot fix, or undefined. */
export function terminalReason(errno: number | undefined): string | undefined {
  return errno === undefined ? undefined : TERMINAL_ERRNOS[errno];
}

/** `text` with every non-empty secret replaced by `***`. */
export function redact(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s) out = out.split(s).join("***");
  return out;
}

// The lines that say what failed. `mariadb` also echoes the failing statement, which may be a
// row line of a megabyte of the source's data: never part of a message.
const TOOL_ERROR_LINE = /^(ERROR \d{4}|mariadb-dump: |mariadb: |mysqldump: |mysql: )/;
const LINE_MAX = 400;

/** The error lines of a tool's stderr (else its last lines), each cut to a readable length. */
export function summarizeToolOutput(stderr: string): string {
  const lines = stderr
    .split("\n")
    .map((l) => l.trimEnd())
    .filter((l) => l !== "");
  const errors = lines.filter((l) => TOOL_ERROR_LINE.test(l));
  return (errors.length > 0 ? errors : lines)
    .slice(-3)
    .map((l) => (l.length > LINE_MAX ? `${l.slice(0, LINE_MAX)}…` : l))
    .join("\n");
}

// What the branch server refuses in a dump will be refused again: the source uses something
// (a collation, a character set, syntax of a newer server) the branch server does not have.
const LOAD_TERMINAL: Record<number, string> = {
  1064: "SchemaIncompatible",
  1115: "CollationUnsupported", // ER_UNKNOWN_CHARACTER_SET
  1273: "CollationUnsupported",
  1286: "SchemaIncompatible", // ER_UNKNOWN_STORAGE_ENGINE
};

interface DriverError {
  errno?: unknown;
  code?: unknown;
  sqlMessage?: unknown;
  message?: unknown;
}

/** The server's error number of a mysql2 error (undefined for network errors). */
export function driverErrno(err: unknown): number | undefined {
  const errno = (err as DriverError | null)?.errno;
  return typeof errno === "number" && errno >= 1000 && errno < 5000 ? errno : undefined;
}

/**
 * A mysql2 error (or any error) as a MysqlBranchError: `doing` says what failed (`connecting
 * to the source app@db:3306/shop`); the server's message follows, redacted. `source`:
 * statements run with the source's credentials or on its tables and filters; `branch`:
 * the provisioner's own statements on the branch server, where only what the server lacks
 * (a collation) is terminal — anything else is the server's state or the admin's grants.
 */
export function fromDriverError(
  err: unknown,
  doing: string,
  secrets: readonly (string | undefined)[],
  side: "source" | "branch",
): MysqlBranchError {
  if (err instanceof MysqlBranchError) return err;
  const e = (err as DriverError | null) ?? {};
  const errno = driverErrno(err);
  const text =
    typeof e.sqlMessage === "string" ? e.sqlMessage : typeof e.message === "string" ? e.message : String(err);
  const code = typeof e.code === "string" ? ` (${e.code}${errno === undefined ? "" : ` ${errno}`})` : "";
  const reason =
    side === "source" ? terminalReason(errno) : errno === undefined ? undefined : LOAD_TERMINAL[errno];
  return new MysqlBranchError(
    reason ?? (side === "source" ? "SourceUnavailable" : "BranchServerError"),
    `${doing}: ${redact(text, secrets)}${code}`,
    reason !== undefined ? "terminal" : "transient",
  );
}

// `ERROR 1064 (42000) at line 3: …` (mariadb), `mariadb-dump: Got error: 1045: "…"`,
// `mariadb-dump: Couldn't execute '…': … (1146)`.
const TOOL_ERRNO = [/\bERROR (\d{4})\b/, /Got error: (\d{4})\b/, /\((\d{4})\)\s*$/m];

/** The first server error number a tool printed, if any. */
export function toolErrno(stderr: string): number | undefined {
  for (const re of TOOL_ERRNO) {
    const m = re.exec(stderr);
    if (m) return Number(m[1]);
  }
  return undefined;
}

/**
 * What mariadb-dump prints when the source user may not read a routine's body (MariaDB
 * shows it to its definer, or to users who can read mysql.proc): not fixable by a retry.
 */
const ROUTINE_PRIVILEGE = /insufficient privileges to SHOW CREATE (PROCEDURE|FUNCTION|PACKAGE)/;

/**
 * A failed tool as a MysqlBranchError, from its (redacted) stderr: `source` for the dump
 * (the source's credentials, tables and filters), `branch` for the load.
 */
export function fromToolFailure(
  tool: string,
  doing: string,
  exit: string,
  stderr: string,
  secrets: readonly (string | undefined)[],
  side: "source" | "branch",
): MysqlBranchError {
  const text = summarizeToolOutput(redact(stderr, secrets));
  if (side === "source" && ROUTINE_PRIVILEGE.test(text))
    return new MysqlBranchError(
      "SourceAccessDenied",
      `${doing}: ${tool} ${exit}: ${text} — the source user cannot read a routine's definition: ` +
        "make it the routine's definer, or grant it SELECT on mysql.proc",
      "terminal",
    );
  const errno = toolErrno(text);
  const reason =
    side === "source" ? terminalReason(errno) : errno === undefined ? undefined : LOAD_TERMINAL[errno];
  return new MysqlBranchError(
    reason ?? "CopyFailed",
    `${doing}: ${tool} ${exit}${text === "" ? "" : `: ${text}`}`,
    reason !== undefined ? "terminal" : "transient",
  );
}
