// The Postgres half of the `server` provisioner (branch-provisioner.ts): branches are
// databases on one configured PostgreSQL server, each with its own login role. A source
// on that same server is copied by the server itself (pg-template-copy.ts: a clone on
// PostgreSQL 18, else a template copy), any other — or one that is busy — is streamed
// (pg-stream-copy.ts). Either way the source's credentials are checked first
// (pg-source-check.ts). A branch is found again by its generated names; it is complete
// once its database carries the completion comment, written last; anything less is
// dropped and made again. Names that are not generated branch names are never touched.
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { OptionError } from "../../../../lib/option-error.js";
import type {
  BranchCreateRequest,
  BranchProvisioner,
  BranchRef,
  ProvisionedBranch,
} from "../branch-provisioner.js";
import { isGeneratedBranchName } from "../branch-identifiers.js";
import { parseSourceUrl, SourceUrlError, type SourceDatabase } from "../connection-url.js";
import { createBranchRole, dropBranch, giveObjectsTo, restrictConnect } from "./pg-branch-roles.js";
import { PgClientTools } from "./pg-client-tools.js";
import { pgQuoteIdentifier } from "./pg-copy-commands.js";
import { describePgError, describeTarget, PgBranchError, PgSession, type PgTarget } from "./pg-session.js";
import { inspectSource, type FilterStep } from "./pg-source-check.js";
import {
  checkPgDump,
  createEmptyBranch,
  exportSnapshot,
  moveSequencesPastRows,
  streamPlan,
} from "./pg-stream-copy.js";
import { createFromTemplate, trimToMode, type CloneState } from "./pg-template-copy.js";

type Method = NonNullable<ProvisionedBranch["method"]>;

export interface PgServerBranchesOptions {
  /**
   * postgres:// URL of a superuser, or of a role with CREATEDB and CREATEROLE, on the server
   * that holds branches; its database is the one the provisioner connects to (e.g.
   * `postgres`). Holds a password: never logged.
   */
  adminUrl: string;
  /** Where clients in the cluster reach the server. Default: the admin URL's host and port. */
  advertise?: { host: string; port: number };
  /**
   * Other host names of this same server in source URLs (e.g. its Service's DNS names): a
   * source on one of them, at the admin URL's or the advertised port, is on this server.
   * Default none.
   */
  serverAliases?: readonly string[];
  /** Directory holding pg_dump and psql (at least the sources' major version). Default: PATH. */
  pgBinDir?: string;
  logger: Pick<Logger, "info" | "warn" | "error">;
}

// The completion comment, written last: `… method=clone`.
const COMPLETE = "switchyard branch complete";
const COMPLETE_PATTERN = /^switchyard branch complete; method=(clone|template|stream)$/;

interface BranchState {
  database: boolean;
  role: boolean;
  /** From the completion comment; undefined when the database has none. */
  method: Method | undefined;
}

export class PgServerBranches implements BranchProvisioner {
  readonly name = "server" as const;
  readonly #admin: SourceDatabase;
  readonly #advertise: { host: string; port: number };
  readonly #sameServer: Set<string>;
  readonly #tools: PgClientTools;
  readonly #logger: PgServerBranchesOptions["logger"];
  readonly #clone: CloneState = { refused: undefined };

  constructor(options: PgServerBranchesOptions) {
    try {
      this.#admin = parseSourceUrl("PgBranchDatabase", options.adminUrl, "the admin URL");
    } catch (err) {
      if (err instanceof SourceUrlError) throw new OptionError("adminUrl", err.problem);
      throw err;
    }
    const a = options.advertise;
    if (a !== undefined && (a.host === "" || !Number.isInteger(a.port) || a.port < 1 || a.port > 65535))
      throw new OptionError("advertise", "needs a host and a port from 1 to 65535");
    this.#advertise = a ?? { host: this.#admin.host, port: this.#admin.port };
    const key = (host: string, port: number) => `${host.toLowerCase().replace(/\.$/, "")}:${port}`;
    const ports = [this.#admin.port, this.#advertise.port];
    this.#sameServer = new Set([
      key(this.#admin.host, this.#admin.port),
      key(this.#advertise.host, this.#advertise.port),
      ...(options.serverAliases ?? []).flatMap((h) => ports.map((p) => key(h, p))),
    ]);
    if (options.pgBinDir !== undefined) {
      const missing = (["pg_dump", "psql"] as const).filter((t) => !existsSync(join(options.pgBinDir!, t)));
      if (missing.length > 0)
        throw new OptionError(
          "pgBinDir",
          `${options.pgBinDir} has no ${missing.join(" or ")}: give the directory of the PostgreSQL client programs`,
        );
    }
    this.#tools = new PgClientTools(options.pgBinDir);
    this.#logger = options.logger;
  }

  describe(): string {
    const { host, port, user, database } = this.#admin;
    return (
      `server provisioner (PostgreSQL): branches on ${describeTarget({ host, port, user, database, password: undefined })}, ` +
      `reached by clients at ${this.#advertise.host}:${this.#advertise.port}; pg_dump and psql ${this.#tools.where()}`
    );
  }

  async create(request: BranchCreateRequest, signal: AbortSignal): Promise<ProvisionedBranch> {
    const { database, user, password } = request.identifiers;
    this.#checkNames(request.kind, database, user);
    const started = Date.now();
    const admin = await this.#connectAdmin(signal);
    try {
      const versionNum = await serverVersionNum(admin);
      const state = await branchState(admin, database, user);
      const made = (method: Method): ProvisionedBranch => ({
        branchName: database,
        host: this.#advertise.host,
        port: this.#advertise.port,
        user,
        password,
        method,
      });
      if (state.database && state.role && state.method !== undefined) return made(state.method);
      if (state.database || state.role) {
        this.#logger.info(
          { cr: request.cr, branch: database },
          "dropping a half-made branch to make it again",
        );
        await dropBranch(admin, database, user, versionNum);
      }
      const method = await this.#make(admin, request, versionNum, signal);
      await restrictConnect(admin, database);
      await admin.query(
        `COMMENT ON DATABASE ${pgQuoteIdentifier(database)} IS '${COMPLETE}; method=${method}'`,
      );
      this.#logger.info(
        { cr: request.cr, branch: database, method, ms: Date.now() - started },
        "branch made",
      );
      return made(method);
    } catch (err) {
      throw this.#failure(err, signal, `making branch ${database}`, [password, request.source.password]);
    } finally {
      await admin.close();
    }
  }

  async drop(branch: BranchRef, signal: AbortSignal): Promise<void> {
    this.#checkNames(branch.kind, branch.branchName, branch.user);
    const admin = await this.#connectAdmin(signal);
    try {
      await dropBranch(admin, branch.branchName, branch.user, await serverVersionNum(admin));
      this.#logger.info({ cr: branch.cr, branch: branch.branchName }, "branch dropped");
    } catch (err) {
      throw this.#failure(err, signal, `dropping branch ${branch.branchName}`, []);
    } finally {
      await admin.close();
    }
  }

  /** Source and server are one when the source's host:port is one of this server's names. */
  #isOnThisServer(source: SourceDatabase): boolean {
    return this.#sameServer.has(`${source.host.toLowerCase().replace(/\.$/, "")}:${source.port}`);
  }

  /**
   * The role, then the database by the server's own copy when the source is on this server
   * (and not busy), else streamed. The source is checked with its own credentials before
   * anything is made, and so is pg_dump when the copy will be streamed.
   */
  async #make(
    admin: PgSession,
    request: BranchCreateRequest,
    versionNum: number,
    signal: AbortSignal,
  ): Promise<Method> {
    const { database, user, password } = request.identifiers;
    const filters = request.plan.filter((s): s is FilterStep => s.kind === "copyRows");
    const what = `the source ${describeTarget(request.source)}`;
    const connectSource = () => PgSession.connect(request.source, signal, what, true);
    let source: PgSession | undefined = await connectSource();
    try {
      const facts = await inspectSource(source, request.copy.mode, filters, what);
      const onThisServer = this.#isOnThisServer(request.source);
      const streams = request.plan.some((s) => s.kind !== "createDatabase");
      if (!onThisServer && streams) await checkPgDump(this.#tools, facts, what);
      await createBranchRole(admin, user, password, await isSuperuser(admin));
      if (onThisServer) {
        // A template copy waits for the source to have no sessions: ours goes first.
        await source.close();
        source = undefined;
        const made = await this.#byTemplate(admin, request, filters, versionNum, signal);
        if (made !== undefined) return made;
        source = await connectSource();
        if (streams) await checkPgDump(this.#tools, facts, what);
      }
      const snapshot = await exportSnapshot(source, this.#logger);
      await createEmptyBranch(admin, { branch: database, owner: user }, facts, this.#logger);
      // The admin URL's address and parameters (sslmode), the branch user's name and password.
      const branch: PgTarget = { ...this.#admin, database, user, password };
      await streamPlan({
        tools: this.#tools,
        source: request.source,
        branch,
        plan: request.plan,
        snapshot,
        what,
        signal,
      });
    } finally {
      await source?.close();
    }
    if (request.copy.mode !== "all" && filters.length > 0)
      await this.#inBranch(database, signal, (branch) => moveSequencesPastRows(branch, filters));
    return "stream";
  }

  /** The server's own copy, trimmed and handed to the branch user; undefined when it must be streamed. */
  async #byTemplate(
    admin: PgSession,
    request: BranchCreateRequest,
    filters: readonly FilterStep[],
    versionNum: number,
    signal: AbortSignal,
  ): Promise<Method | undefined> {
    const { database, user } = request.identifiers;
    const names = { source: request.source.database, branch: database, owner: user };
    const outcome = await createFromTemplate(admin, names, versionNum, this.#clone, this.#logger);
    if ("fallback" in outcome) {
      this.#logger.info(
        { cr: request.cr, branch: database, why: outcome.fallback },
        "streaming the branch instead of a template copy",
      );
      return undefined;
    }
    const owners = await this.#inBranch(database, signal, async (branch) => {
      await branch.query("BEGIN");
      await trimToMode(branch, request.copy.mode, filters);
      const moved = await giveObjectsTo(branch, user);
      await branch.query("COMMIT");
      return moved;
    });
    if (owners.skipped.length > 0)
      this.#logger.warn(
        { branch: database, types: owners.skipped },
        "objects of these types keep their source owner",
      );
    return outcome.made;
  }

  /** Runs `use` on a session connected to the branch database as the admin. */
  async #inBranch<T>(
    database: string,
    signal: AbortSignal,
    use: (branch: PgSession) => Promise<T>,
  ): Promise<T> {
    const branch = await PgSession.connect(
      { ...this.#admin, database },
      signal,
      `the branch ${database}`,
      false,
    );
    try {
      return await use(branch);
    } finally {
      await branch.close();
    }
  }

  /**
   * What `create` and `drop` reject with: the abort's reason once aborted; our own errors
   * as they are; any other (a statement the branch server failed) retried, with context.
   */
  #failure(err: unknown, signal: AbortSignal, doing: string, secrets: (string | undefined)[]): unknown {
    if (signal.aborted) return signal.reason;
    if (err instanceof PgBranchError) return err;
    const server = describeTarget(this.#admin);
    return new PgBranchError(
      "BranchServerFailed",
      `${doing} on ${server} failed: ${describePgError(err, [...secrets, this.#admin.password])}`,
      "transient",
    );
  }

  #connectAdmin(signal: AbortSignal): Promise<PgSession> {
    return PgSession.connect(this.#admin, signal, `the branch server ${describeTarget(this.#admin)}`, false);
  }

  #checkNames(kind: BranchCreateRequest["kind"], database: string, user: string): void {
    if (kind !== "PgBranchDatabase")
      throw new PgBranchError(
        "WrongEngine",
        `the PostgreSQL server provisioner cannot make a ${kind}`,
        "terminal",
      );
    for (const [name, what] of [
      [database, "database"],
      [user, "user"],
    ] as const) {
      if (!isGeneratedBranchName(kind, name, what))
        throw new PgBranchError(
          "NotABranchName",
          `${JSON.stringify(name)} is not a generated branch ${what} name (sy_…): refusing to touch it`,
          "terminal",
        );
    }
  }
}

async function serverVersionNum(admin: PgSession): Promise<number> {
  const [row] = await admin.query<{ v: number }>("SELECT current_setting('server_version_num')::int AS v");
  return Number(row?.v ?? 0);
}

async function isSuperuser(admin: PgSession): Promise<boolean> {
  const [row] = await admin.query<{ s: boolean }>(
    "SELECT rolsuper AS s FROM pg_roles WHERE rolname = current_user",
  );
  return row?.s === true;
}

async function branchState(admin: PgSession, database: string, user: string): Promise<BranchState> {
  const [row] = await admin.query<{ database: boolean; role: boolean; comment: string | null }>(
    `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS database,
            EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $2) AS role,
            (SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1) AS comment`,
    [database, user],
  );
  const method = COMPLETE_PATTERN.exec(row?.comment ?? "")?.[1] as Method | undefined;
  return { database: row?.database === true, role: row?.role === true, method };
}
