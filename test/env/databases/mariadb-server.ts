// A real MariaDB server for tests (Debian's `mariadb-server` package: mariadbd and
// mariadb-install-db on PATH). Each server lives in its own `set-mariadb-*` directory of
// processes.ts — data directory, socket, pid file, temp files and log — so a killed owner's
// server is swept like a cluster set's processes, and `stop()` removes every file. Any
// number of servers may run at once (a branch's source server and its branch server).
import { randomBytes } from "node:crypto";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import mysql from "mysql2/promise";
import { eventually } from "../../support/poll.js";
import { freePorts } from "../ports.js";
import { envRoot, ProcessGroupDir, sweepOrphans, type ManagedProcess } from "../processes.js";

export interface MariadbServer {
  host: "127.0.0.1";
  port: number;
  /** `mysql://admin:<password>@127.0.0.1:<port>/`: a user with every privilege, WITH GRANT OPTION. */
  adminUrl: string;
  adminUser: string;
  adminPassword: string;
  /** `SELECT VERSION()`, e.g. `10.11.19-MariaDB-0+deb12u1`. */
  version: string;
  /** The server's own directory (data, socket, logs); gone after `stop()`. */
  dir: string;
  /** Stops the server (SIGTERM, then SIGKILL after 10 s) and removes every file it had. */
  stop(): Promise<void>;
}

export interface MariadbOptions {
  /** Names the directory and the log (default "mariadb"). */
  name?: string;
  /** How long install and start-up may take, ms (default 60 000). */
  readyTimeoutMs?: number;
}

const ADMIN_USER = "admin";
// A unix socket path longer than this cannot be bound (sun_path is 108 bytes).
const SOCKET_PATH_MAX = 107;

// Small and fast: a test server holds a few MB, and durability does not matter.
const SERVER_SETTINGS = [
  "--skip-name-resolve",
  "--innodb-buffer-pool-size=16M",
  "--innodb-log-file-size=8M",
  "--innodb-flush-log-at-trx-commit=0",
  "--innodb-doublewrite=0",
  "--performance-schema=OFF",
];

/** Installs a fresh data directory, starts mariadbd on 127.0.0.1 and a free port, and waits until the admin can log in. */
export async function startMariadb(options: MariadbOptions = {}): Promise<MariadbServer> {
  const name = options.name ?? "mariadb";
  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  await sweepOrphans();
  const group = new ProcessGroupDir(
    join(envRoot(), `set-${name}-${process.pid}-${randomBytes(4).toString("hex")}`),
  );
  let server: ManagedProcess | undefined;
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await server?.stop(10_000);
      group.remove();
    })());
  try {
    const dataDir = join(group.dir, "data");
    const tmpDir = join(group.dir, "tmp");
    mkdirSync(tmpDir, { recursive: true });
    const socket = join(dataDir, "mariadb.sock");
    if (socket.length > SOCKET_PATH_MAX)
      throw new Error(
        `the MariaDB socket path ${socket} is longer than ${SOCKET_PATH_MAX} bytes: ` +
          "set SWITCHYARD_ENV_TMPDIR to a shorter directory",
      );
    // mariadbd refuses to run as root unless told to. `--user=root` (only when the tests
    // run as root) keeps every file owned by the test's own user, so `stop()` removes it all
    // without a chown and nothing depends on a system account.
    const asUser = process.getuid?.() === 0 ? ["--user=root"] : [];
    const adminPassword = randomBytes(18).toString("base64url");
    // Run once by mariadb-install-db after the system tables (FLUSH PRIVILEGES turns the
    // grant tables on in bootstrap mode); one statement per line, as bootstrap reads them.
    const extraSql = join(group.dir, "admin.sql");
    writeFileSync(
      extraSql,
      "FLUSH PRIVILEGES;\n" +
        `CREATE USER '${ADMIN_USER}'@'%' IDENTIFIED BY '${adminPassword}';\n` +
        `GRANT ALL PRIVILEGES ON *.* TO '${ADMIN_USER}'@'%' WITH GRANT OPTION;\n`,
      { mode: 0o600 },
    );
    const install = group.spawn("mariadb-install-db", "mariadb-install-db", [
      "--no-defaults",
      `--datadir=${dataDir}`,
      ...asUser,
      "--skip-test-db",
      `--extra-file=${extraSql}`,
      // Passed on to the bootstrap server: two installs at once would share /tmp otherwise.
      `--tmpdir=${tmpDir}`,
      ...SERVER_SETTINGS,
    ]);
    const installed = await install.exited;
    rmSync(extraSql, { force: true });
    if (installed !== 0)
      throw new Error(
        `mariadb-install-db exited with ${installed} (is Debian's mariadb-server installed?):\n${install.logTail()}`,
      );
    const [port] = await freePorts(1);
    const proc = group.spawn("mariadbd", "mariadbd", [
      "--no-defaults",
      ...asUser,
      `--datadir=${dataDir}`,
      `--socket=${socket}`,
      `--pid-file=${join(dataDir, "mariadb.pid")}`,
      `--tmpdir=${tmpDir}`,
      "--bind-address=127.0.0.1",
      `--port=${port}`,
      ...SERVER_SETTINGS,
    ]);
    server = proc;
    const connection = { host: "127.0.0.1", port: port!, user: ADMIN_USER, password: adminPassword };
    const version = await eventually(
      `mariadbd on 127.0.0.1:${port} to accept the admin`,
      async () => {
        const c = await mysql.createConnection(connection);
        try {
          const [rows] = await c.query<mysql.RowDataPacket[]>("SELECT VERSION() AS v");
          return String(rows[0]!.v);
        } finally {
          await c.end();
        }
      },
      {
        timeoutMs: Math.max(1000, deadline - Date.now()),
        intervalMs: 100,
        giveUp: () =>
          proc.hasExited() ? new Error(`mariadbd exited during start-up:\n${proc.logTail()}`) : undefined,
      },
    );
    return {
      host: "127.0.0.1",
      port: port!,
      adminUrl: `mysql://${ADMIN_USER}:${adminPassword}@127.0.0.1:${port}/`,
      adminUser: ADMIN_USER,
      adminPassword,
      version,
      dir: group.dir,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
