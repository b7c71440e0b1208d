// The MySQL/MariaDB half of the `server` provisioner (branch-provisioner.ts): branches are
// databases on one configured MariaDB server (10.5 or later: the completion marker is the
// database's comment, mysql-branch-sql.ts), each with its own user holding ALL on that
// database only. Two ways to copy:
// - the source lives on this same server (its host and port are the admin URL's, the
//   advertised address's, or one of `sameServerHosts`): the server copies itself — the
//   schema by `mariadb-dump --no-data` of the source into the branch (CREATE TABLE … LIKE
//   would lose foreign keys, views, routines and triggers), rows by INSERT … SELECT inside
//   the server (mysql-same-server-rows.ts), triggers last;
// - otherwise `mariadb-dump` of the source streams into `mariadb` on the branch, per step
//   of the copy plan (mysql-copy-commands.ts), nothing staged on disk.
// Dumps are loaded by the branch user with every definer rewritten to it, so no copied
// view, trigger or routine runs with the source user's rights. The admin needs CREATE,
// DROP, ALTER, SELECT and INSERT on every database (it reads same-server sources and
// fills branches), CREATE USER, GRANT OPTION, PROCESS and CONNECTION ADMIN (to end a
// dropped branch's sessions).
import { join } from "node:path";
import mysql, { type Connection, type RowDataPacket } from "mysql2/promise";
import type { Logger } from "pino";
import { OptionError } from "../../../../lib/option-error.js";
import { isGeneratedBranchName } from "../branch-identifiers.js";
import type {
  BranchCreateRequest,
  BranchProvisioner,
  BranchRef,
  ProvisionedBranch,
} from "../branch-provisioner.js";
import { redactedUrl } from "../connection-url.js";
import type { CopyStep } from "../copy-plan.js";
import { fromDriverError, MysqlBranchError } from "./mysql-branch-error.js";
import {
  branchState,
  createBranchDatabase,
  dropBranch,
  ensureBranchUser,
  markComplete,
  type MysqlCopyMethod,
} from "./mysql-branch-sql.js";
import {
  DUMP_COMMON,
  checkPlanTables,
  copiesEverything,
  mysqlDumpCommand,
  mysqlStreamCommands,
  type MysqlDumpCommand,
} from "./mysql-copy-commands.js";
import {
  driverOptions,
  OptionFiles,
  parseAdminUrl,
  tlsMode,
  type MysqlEndpoint,
  type TlsMode,
} from "./mysql-connection-options.js";
import { abortReason, runDumpPipe, toolEnvironment } from "./mysql-dump-pipe.js";
import { copyRowsOnServer, type RowCopy } from "./mysql-same-server-rows.js";
import { checkSource, type SourceFacts } from "./mysql-source-check.js";

export interface MysqlServerBranchesOptions {
  /** `mysql://user:password@host:port/` of the branch server's admin (see the module comment for its grants). */
  adminUrl: string;
  /**
   * Other host names of this same server in source URLs (e.g. its Service's DNS names): a
   * source on one of them, at the admin URL's or the advertised port, is on this server.
   */
  serverAliases?: readonly string[];
  /** Directory holding `mariadb-dump` and `mariadb` (default: found on PATH). */
  clientBinDir?: string;
  /** Where branch users reach the server, as written to their Secret (default: the admin URL's host and port). */
  advertise?: { host: string; port: number };
  logger: Pick<Logger, "info" | "warn" | "debug">;
  /** Environment of the client tools (default: this process's, less MYSQL_* and MARIADB_* variables). */
  env?: NodeJS.ProcessEnv;
}

// Both tools allow 1 GB packets, so a single large row never exceeds a client's limit.
const MAX_PACKET = "--max-allowed-packet=1073741824";

export class MysqlServerBranches implements BranchProvisioner {
  readonly name = "server" as const;
  readonly #admin: MysqlEndpoint;
  readonly #advertise: { host: string; port: number };
  readonly #sameHosts: readonly string[];
  readonly #binDir: string | undefined;
  readonly #env: NodeJS.ProcessEnv;
  readonly #logger: MysqlServerBranchesOptions["logger"];
  #serverChecked = false;

  constructor(options: MysqlServerBranchesOptions) {
    this.#admin = parseAdminUrl(options.adminUrl, "adminUrl");
    const adv = options.advertise ?? { host: this.#admin.host, port: this.#admin.port };
    if (typeof adv.host !== "string" || adv.host.trim() === "")
      throw new OptionError("advertise.host", "must be a host name or address branch users can reach");
    if (!Number.isInteger(adv.port) || adv.port < 1 || adv.port > 65535)
      throw new OptionError("advertise.port", `must be an integer from 1 to 65535, got ${String(adv.port)}`);
    this.#advertise = { host: adv.host, port: adv.port };
    for (const [i, h] of (options.serverAliases ?? []).entries())
      if (typeof h !== "string" || h.trim() === "" || h.includes(":"))
        throw new OptionError(`serverAliases[${i}]`, "must be a host name without a port");
    this.#sameHosts = (options.serverAliases ?? []).map((h) => h.toLowerCase());
    this.#binDir = options.clientBinDir;
    this.#env = options.env ?? toolEnvironment();
    this.#logger = options.logger;
  }

  describe(): string {
    const a = this.#admin;
    const also = this.#sameHosts.length > 0 ? ` (also named ${this.#sameHosts.join(", ")})` : "";
    return (
      `server provisioner (MySQL/MariaDB): branches on ${a.host}:${a.port} as ${a.user}, reached at ` +
      `${this.#advertise.host}:${this.#advertise.port}; sources on this server${also} are copied by the server itself, ` +
      "others streamed with mariadb-dump"
    );
  }

  async create(request: BranchCreateRequest, signal: AbortSignal): Promise<ProvisionedBranch> {
    const { identifiers: id, cr, source } = request;
    this.#checkNames(request.kind, id.database, id.user);
    const log = this.#logger;
    const at = { branch: id.database, cr: `${cr.namespace}/${cr.name}` };
    const secrets = [this.#admin.password, source.password, id.password];
    const described = redactedUrl("MysqlBranchDatabase", source);
    const started = Date.now();
    const { admin, close } = await this.#connectAdmin(signal);
    try {
      const branchStep = async <T>(doing: string, run: () => Promise<T>): Promise<T> => {
        try {
          return await run();
        } catch (err) {
          throw fromDriverError(err, `${doing} (branch ${id.database})`, secrets, "branch");
        }
      };
      await branchStep("checking the branch server", () => this.#checkServer(admin));
      const state = await branchStep("reading the branch's state", () => branchState(admin, id.database));
      if (state.state === "complete") {
        await branchStep("ensuring the branch user", () =>
          ensureBranchUser(admin, id.database, id.user, id.password),
        );
        log.info(at, "MySQL branch already complete");
        return this.#provisioned(request, state.method);
      }
      if (state.state === "half-made") log.info(at, "dropping a half-made MySQL branch to make it again");
      await branchStep("dropping leftovers", () => dropBranch(admin, id.database, id.user));
      const sameServer = this.#isSameServer(request);
      const method: MysqlCopyMethod = sameServer ? "template" : "stream";
      let tls: TlsMode | undefined;
      try {
        tls = tlsMode(source.params, `the source ${described}`);
      } catch (err) {
        throw new MysqlBranchError("SourceInvalid", (err as Error).message, "terminal");
      }
      const from: MysqlEndpoint = {
        host: sameServer ? this.#admin.host : source.host,
        port: sameServer ? this.#admin.port : source.port,
        user: source.user,
        password: source.password,
        tls: sameServer ? this.#admin.tls : tls,
      };
      checkPlanTables(request.plan, source.database);
      const facts = await checkSource(
        from,
        source.database,
        request.plan,
        {
          listTables: sameServer && copiesEverything(request.plan),
          described,
        },
        signal,
      );
      if (signal.aborted) throw abortReason(signal);
      log.info({ ...at, method, mode: request.copy.mode, source: described }, "making MySQL branch");
      await branchStep("creating the branch database", () =>
        createBranchDatabase(admin, id.database, facts, cr),
      );
      await branchStep("creating the branch user", () =>
        ensureBranchUser(admin, id.database, id.user, id.password),
      );
      await this.#copy(request, from, facts, sameServer, { secrets, described, signal });
      await branchStep("marking the branch complete", () => markComplete(admin, id.database, cr, method));
      log.info({ ...at, method, ms: Date.now() - started }, "MySQL branch ready");
      return this.#provisioned(request, method);
    } catch (err) {
      if (signal.aborted) throw abortReason(signal);
      throw err;
    } finally {
      close();
    }
  }

  async drop(branch: BranchRef, signal: AbortSignal): Promise<void> {
    this.#checkNames(branch.kind, branch.branchName, branch.user);
    const { admin, close } = await this.#connectAdmin(signal);
    try {
      await dropBranch(admin, branch.branchName, branch.user);
      this.#logger.info(
        { branch: branch.branchName, cr: `${branch.cr.namespace}/${branch.cr.name}` },
        "MySQL branch dropped",
      );
    } catch (err) {
      if (signal.aborted) throw abortReason(signal);
      throw fromDriverError(err, `dropping branch ${branch.branchName}`, [this.#admin.password], "branch");
    } finally {
      close();
    }
  }

  async #copy(
    request: BranchCreateRequest,
    from: MysqlEndpoint,
    facts: SourceFacts,
    sameServer: boolean,
    ctx: { secrets: (string | undefined)[]; described: string; signal: AbortSignal },
  ): Promise<void> {
    const { identifiers: id, source, plan } = request;
    const files = await OptionFiles.create();
    try {
      const dumpConnection = await files.defaultsFileArg(from);
      const loadConnection = await files.defaultsFileArg({
        ...this.#admin,
        user: id.user,
        password: id.password,
      });
      const pipe = async (command: MysqlDumpCommand) => {
        const doing = `copying ${command.what} of ${ctx.described} into ${id.database}`;
        this.#logger.debug({ branch: id.database, step: command.what }, "MySQL copy step");
        await runDumpPipe(
          {
            dump: {
              command: this.#bin("mariadb-dump"),
              args: [dumpConnection, ...DUMP_COMMON, MAX_PACKET, ...command.args],
            },
            load: {
              command: this.#bin("mariadb"),
              args: [loadConnection, "--batch", "--binary-mode", MAX_PACKET, id.database],
            },
            doing,
            secrets: ctx.secrets,
          },
          ctx.signal,
          this.#env,
        );
      };
      if (!sameServer) {
        for (const command of mysqlStreamCommands(plan, source.database)) await pipe(command);
        return;
      }
      for (const step of plan) {
        const rows = rowCopies(step, facts);
        if (rows !== undefined)
          await copyRowsOnServer(this.#admin, source.database, id.database, rows, ctx.signal, this.#logger);
        else {
          const command = mysqlDumpCommand(step, source.database);
          if (command !== undefined) await pipe(command);
        }
      }
    } finally {
      await files.dispose();
    }
  }

  #bin(tool: string): string {
    return this.#binDir === undefined ? tool : join(this.#binDir, tool);
  }

  #isSameServer(request: BranchCreateRequest): boolean {
    const host = request.source.host.toLowerCase();
    const hosts = [this.#admin.host.toLowerCase(), this.#advertise.host.toLowerCase(), ...this.#sameHosts];
    return hosts.includes(host) && [this.#admin.port, this.#advertise.port].includes(request.source.port);
  }

  #checkNames(kind: string, database: string, user: string): void {
    if (kind !== "MysqlBranchDatabase")
      throw new MysqlBranchError(
        "KindUnsupported",
        `the MySQL/MariaDB provisioner cannot make a ${kind}`,
        "terminal",
      );
    for (const [name, what] of [
      [database, "database"],
      [user, "user"],
    ] as const) {
      if (!isGeneratedBranchName(kind, name, what))
        throw new MysqlBranchError(
          "NameNotGenerated",
          `refusing to touch ${what} ${JSON.stringify(name)}: not a generated branch name (sy_…, a-z 0-9 _)`,
          "terminal",
        );
    }
  }

  async #connectAdmin(signal: AbortSignal): Promise<{ admin: Connection; close: () => void }> {
    if (signal.aborted) throw abortReason(signal);
    let admin: Connection;
    try {
      admin = await mysql.createConnection(driverOptions(this.#admin));
    } catch (err) {
      const where = `${this.#admin.user}@${this.#admin.host}:${this.#admin.port}`;
      throw fromDriverError(
        err,
        `connecting to the branch server as ${where}`,
        [this.#admin.password],
        "branch",
      );
    }
    // An abort destroys the connection, which ends whatever it waits for. `close` removes the
    // listener too: one signal may outlive many creates.
    const onAbort = () => admin.destroy();
    signal.addEventListener("abort", onAbort, { once: true });
    return {
      admin,
      close: () => {
        signal.removeEventListener("abort", onAbort);
        admin.destroy();
      },
    };
  }

  async #checkServer(admin: Connection): Promise<void> {
    if (this.#serverChecked) return;
    const [rows] = await admin.query<RowDataPacket[]>("SELECT VERSION() AS v");
    const version = String(rows[0]!.v);
    const [major = 0, minor = 0] = version.split(".").map(Number);
    if (!/MariaDB/i.test(version) || major < 10 || (major === 10 && minor < 5))
      throw new MysqlBranchError(
        "BranchServerUnsupported",
        `the branch server runs ${version}: MySQL/MariaDB branches need MariaDB 10.5 or later (database comments mark complete branches)`,
        "transient",
      );
    this.#serverChecked = true;
  }

  #provisioned(request: BranchCreateRequest, method: MysqlCopyMethod): ProvisionedBranch {
    const { identifiers: id } = request;
    return {
      branchName: id.database,
      host: this.#advertise.host,
      port: this.#advertise.port,
      user: id.user,
      password: id.password,
      method,
    };
  }
}

/** The same-server row copies of a step; undefined for steps that are not rows. */
function rowCopies(step: CopyStep, facts: SourceFacts): RowCopy[] | undefined {
  if (step.kind === "copyAllRows") return (facts.tables ?? []).map((table) => ({ table, where: undefined }));
  if (step.kind === "copyRows") return [{ table: step.table.name, where: step.where, field: step.field }];
  return undefined;
}
