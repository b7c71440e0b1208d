// Connections of the Postgres `server` provisioner (the branch server as its admin, the
// source as the source's own user, a branch as its admin) and the one error type it
// throws. A query honours an AbortSignal: the statement is cancelled on the server
// (pg_cancel_backend from a second connection: the driver has no cancel of its own) so an
// aborted CREATE DATABASE or DELETE does not run on. Errors are classified once, here, by
// SQLSTATE or socket error: `terminal` when retrying cannot help, else `transient`. No message carries a
// password: every text that leaves this module is passed through `redact` first.
import pg from "pg";
import { BranchError } from "../branch-error.js";
import type { DatabaseEndpoint } from "../connection-url.js";

export const PG_BRANCH_FAILED = "SWITCHYARD_BRANCH_PG_FAILED";

/** A failed branch operation; `reason` is the CamelCase condition reason a controller records. */
export class PgBranchError extends BranchError {
  readonly code = PG_BRANCH_FAILED;
}

/** Where to connect: an endpoint plus libpq parameters kept from a source URL (`sslmode`). */
export interface PgTarget extends DatabaseEndpoint {
  params?: Readonly<Record<string, string>>;
}

/** `text` with every secret replaced by `***` (secrets shorter than 4 characters are not searched). */
export function redact(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s !== undefined && s.length >= 4) out = out.split(s).join("***");
  return out;
}

/** The SQLSTATE of a driver error, or the socket error code (ECONNREFUSED), or undefined. */
export function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

// Connection refused by the server for who we are or what we asked for: wrong password,
// no pg_hba entry, no such database, no CONNECT right. Retrying the same thing fails again.
const REFUSED_CONNECTION = new Set(["28P01", "28000", "3D000", "42501"]);

/** Whether a failed statement is the request's fault: a data, integrity, syntax or feature error. */
export function isRejectedStatement(err: unknown): boolean {
  const code = errorCode(err);
  return code !== undefined && /^(22|23|42|0A)/.test(code) && code.length === 5;
}

function sslOption(params: Readonly<Record<string, string>> | undefined): pg.ClientConfig["ssl"] {
  switch (params?.sslmode) {
    case undefined:
    case "disable":
    case "allow":
    case "prefer":
      return false;
    case "require":
      return { rejectUnauthorized: false };
    case "verify-ca":
      return { rejectUnauthorized: true, checkServerIdentity: () => undefined };
    default:
      return { rejectUnauthorized: true };
  }
}

/** One connection; `query` rejects with `signal.reason` once aborted, its statement cancelled. */
export class PgSession {
  private constructor(
    private readonly client: pg.Client,
    private readonly config: pg.ClientConfig,
    private readonly signal: AbortSignal,
  ) {}

  /**
   * Connects to `target`. `what` names it in errors (`the source 10.0.0.5:5432/shop as app`);
   * a refused login is terminal only when `refusalIsTerminal` (the source's credentials
   * come from the CR; the server's admin credentials are the provisioner's configuration).
   */
  static async connect(
    target: PgTarget,
    signal: AbortSignal,
    what: string,
    refusalIsTerminal: boolean,
  ): Promise<PgSession> {
    signal.throwIfAborted();
    const config: pg.ClientConfig = {
      host: target.host,
      port: target.port,
      database: target.database,
      user: target.user,
      connectionTimeoutMillis: 10_000,
      application_name: "switchyard-branching",
      ssl: sslOption(target.params),
      ...(target.password === undefined ? {} : { password: target.password }),
      ...(target.params?.options === undefined ? {} : { options: target.params.options }),
    };
    const client = new pg.Client(config);
    // A server that goes away between queries must not crash the process.
    client.on("error", () => undefined);
    const onAbort = () => void client.end().catch(() => undefined);
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      await client.connect();
    } catch (err) {
      signal.throwIfAborted();
      const code = errorCode(err);
      const refused = code !== undefined && REFUSED_CONNECTION.has(code);
      const detail = redact(err instanceof Error ? err.message : String(err), [target.password]);
      throw new PgBranchError(
        refused ? "ConnectionRefused" : "Unreachable",
        `cannot connect to ${what}: ${detail}${code && !detail.includes(code) ? ` (${code})` : ""}`,
        refused && refusalIsTerminal ? "terminal" : "transient",
      );
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
    return new PgSession(client, config, signal);
  }

  /** Whether this session's signal has aborted (errors then mean only that). */
  get aborted(): boolean {
    return this.signal.aborted;
  }

  /** Rows of one statement (or of the last of several, when `params` is absent). */
  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    sql: string,
    params?: unknown[],
  ): Promise<R[]> {
    this.signal.throwIfAborted();
    const pid = (this.client as unknown as { processID: number | null }).processID;
    const onAbort = () => void this.cancel(pid);
    this.signal.addEventListener("abort", onAbort, { once: true });
    try {
      const result = (await this.client.query<R>(sql, params)) as pg.QueryResult<R> | pg.QueryResult<R>[];
      return Array.isArray(result) ? (result.at(-1)?.rows ?? []) : result.rows;
    } catch (err) {
      this.signal.throwIfAborted();
      throw err;
    } finally {
      this.signal.removeEventListener("abort", onAbort);
    }
  }

  /** Ends the connection (a transaction left open is rolled back by the server). */
  async close(): Promise<void> {
    await this.client.end().catch(() => undefined);
  }

  private async cancel(pid: number | null): Promise<void> {
    if (pid === null) return;
    const other = new pg.Client(this.config);
    other.on("error", () => undefined);
    try {
      await other.connect();
      await other.query("SELECT pg_cancel_backend($1)", [pid]);
    } catch {
      // The server is gone or refuses: ending our connection is all that is left.
    } finally {
      await other.end().catch(() => undefined);
      await this.close();
    }
  }
}

/** `host:port/database as user` for messages (never the password). */
export function describeTarget(target: DatabaseEndpoint): string {
  const host = target.host.includes(":") ? `[${target.host}]` : target.host;
  return `${host}:${target.port}/${target.database} as ${target.user}`;
}

/** A statement error as one line (`ERROR text (SQLSTATE)`), secrets redacted. */
export function describePgError(err: unknown, secrets: readonly (string | undefined)[]): string {
  const e = err as { message?: unknown; detail?: unknown; hint?: unknown; code?: unknown };
  const parts = [typeof e?.message === "string" ? e.message : String(err)];
  if (typeof e?.detail === "string") parts.push(e.detail);
  if (typeof e?.hint === "string") parts.push(e.hint);
  const code = typeof e?.code === "string" ? ` (${e.code})` : "";
  return redact(parts.join(" — ") + code, secrets);
}
