// The control plane's database-branching flags (DESIGN §7), added to its command line by
// the process and rendered by the chart (values `branching.*`):
//   --default-cluster                 this member is its Primary's Default cluster (runs the branching controllers)
//   --branch-postgres-url-file <f>    file holding the admin URL of the PostgreSQL server that holds branches
//   --branch-mysql-url-file <f>       the same for MySQL/MariaDB
//   --branch-postgres-advertise <h:p> where clients in the cluster reach that server (default: the URL's host:port)
//   --branch-mysql-advertise <h:p>
//   --branch-server-aliases <list>    other names of those servers in source URLs (e.g. a Service's DNS names)
//   --branch-client-bin-dir <dir>     directory of pg_dump/psql/mariadb-dump/mariadb (default: PATH)
//   --branch-provisioner-postgres <p> `server` (default: when a URL file is given) or `pod`
//   --branch-provisioner-mysql <p>
//   --branch-pod-image-postgres <img> the database image of the `pod` provisioner (e.g. postgres:17)
//   --branch-pod-image-mysql <img>    (e.g. mariadb:11)
// Admin URLs come from files (a mounted Secret), never from a flag's value, so they are not
// in the pod spec or a process listing; errors name the flag and the file, never the URL.
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { OptionError } from "../../../lib/option-error.js";
import type { ControlPlaneMode, FeatureFlags, FlagValues } from "../runtime/index.js";

export interface BranchServerOptions {
  /** Admin URL (postgres:// or mysql://), with its password: never logged. */
  adminUrl: string;
  /** Where clients in the cluster reach the server; undefined = the admin URL's host and port. */
  advertise: { host: string; port: number } | undefined;
}

/** The `pod` provisioner of one engine: a database pod per branch. */
export interface BranchPodOptions {
  /** The database image (the official image's contract: POSTGRES_* or MARIADB_* variables, initdb.d). */
  image: string;
}

export interface BranchingOptions {
  /** Member mode: this cluster is the Default cluster of its Primary. */
  defaultCluster: boolean;
  /** The `server` provisioner's server, when the engine's provisioner is `server`. */
  postgres: BranchServerOptions | undefined;
  mysql: BranchServerOptions | undefined;
  /** The `pod` provisioner, when the engine's provisioner is `pod`. */
  postgresPod: BranchPodOptions | undefined;
  mysqlPod: BranchPodOptions | undefined;
  serverAliases: string[];
  clientBinDir: string | undefined;
}

function add(cmd: Command): Command {
  return cmd
    .option(
      "--default-cluster",
      "this member is its Primary's Default cluster: it runs the database-branching controllers",
      false,
    )
    .option(
      "--branch-postgres-url-file <file>",
      "file holding the admin URL of the PostgreSQL server that holds branches",
    )
    .option(
      "--branch-mysql-url-file <file>",
      "file holding the admin URL of the MySQL/MariaDB server that holds branches",
    )
    .option(
      "--branch-postgres-advertise <host:port>",
      "where clients in the cluster reach the PostgreSQL branch server",
    )
    .option(
      "--branch-mysql-advertise <host:port>",
      "where clients in the cluster reach the MySQL/MariaDB branch server",
    )
    .option(
      "--branch-server-aliases <list>",
      "comma-separated other host names of the branch servers in source URLs",
    )
    .option(
      "--branch-client-bin-dir <dir>",
      "directory holding pg_dump, psql, mariadb-dump and mariadb (default: PATH)",
    )
    .option(
      "--branch-provisioner-postgres <provisioner>",
      "how PostgreSQL branches are made: server (a database on the --branch-postgres-url-file server) or pod (a database pod per branch)",
    )
    .option("--branch-provisioner-mysql <provisioner>", "how MySQL/MariaDB branches are made: server or pod")
    .option(
      "--branch-pod-image-postgres <image>",
      "PostgreSQL image of the pod provisioner (the official postgres image's contract), e.g. postgres:17",
    )
    .option(
      "--branch-pod-image-mysql <image>",
      "MariaDB image of the pod provisioner (the official mariadb image's contract), e.g. mariadb:11",
    );
}

/**
 * The engine's provisioner from its flags: `server` needs the URL file, `pod` the image, and
 * neither takes the other's flags. Nothing given: no provisioner for the engine.
 */
function provisionerChoice(
  engine: "postgres" | "mysql",
  choice: string | undefined,
  server: BranchServerOptions | undefined,
  image: string | undefined,
): { server: BranchServerOptions | undefined; pod: BranchPodOptions | undefined } {
  const flag = `--branch-provisioner-${engine}`;
  const urlFlag = `--branch-${engine}-url-file`;
  const imageFlag = `--branch-pod-image-${engine}`;
  if (choice !== undefined && choice !== "server" && choice !== "pod")
    throw new OptionError(flag, `must be server or pod, got ${JSON.stringify(choice)}`);
  if (choice === "pod") {
    if (image === undefined || image.trim() === "")
      throw new OptionError(imageFlag, `is needed with ${flag} pod: the database image each branch pod runs`);
    if (server)
      throw new OptionError(
        urlFlag,
        `is for the server provisioner, not ${flag} pod: drop it or choose server`,
      );
    return { server: undefined, pod: { image: image.trim() } };
  }
  if (image !== undefined)
    throw new OptionError(imageFlag, `is for the pod provisioner: add ${flag} pod, or drop it`);
  if (choice === "server" && !server)
    throw new OptionError(flag, `server needs ${urlFlag} (the server that holds branches), or choose pod`);
  return { server, pod: undefined };
}

const SCHEMES = { postgres: ["postgres:", "postgresql:"], mysql: ["mysql:", "mariadb:"] };

function server(
  engine: "postgres" | "mysql",
  fileFlag: string,
  file: string | undefined,
  advertiseFlag: string,
  advertise: string | undefined,
): BranchServerOptions | undefined {
  if (file === undefined) {
    if (advertise !== undefined)
      throw new OptionError(advertiseFlag, `needs ${fileFlag} too (the server it advertises)`);
    return undefined;
  }
  let text: string;
  try {
    text = readFileSync(file, "utf8").trim();
  } catch (err) {
    throw new OptionError(fileFlag, `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
  }
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  const want = SCHEMES[engine];
  if (!url || !want.includes(url.protocol) || !url.hostname || !url.username) {
    throw new OptionError(
      fileFlag,
      `${file} must hold one ${want.map((s) => `${s}//`).join(" or ")} URL with a user and host, ` +
        "e.g. postgres://admin:<password>@db.example:5432/postgres (the value is not shown)",
    );
  }
  return {
    adminUrl: text,
    advertise: advertise === undefined ? undefined : hostPort(advertiseFlag, advertise),
  };
}

function hostPort(flag: string, v: string): { host: string; port: number } {
  const m = /^(\[[0-9a-fA-F:]+\]|[^:\s]+):(\d{1,5})$/.exec(v);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port < 1 || port > 65535)
    throw new OptionError(flag, `"${v}" is not host:port (e.g. branches-db.data:5432)`);
  return { host: m[1]!.replace(/^\[|\]$/g, ""), port };
}

function parse(o: FlagValues, mode: ControlPlaneMode): BranchingOptions {
  const defaultCluster = o.defaultCluster === true;
  const postgres = server(
    "postgres",
    "--branch-postgres-url-file",
    o.branchPostgresUrlFile as string | undefined,
    "--branch-postgres-advertise",
    o.branchPostgresAdvertise as string | undefined,
  );
  const mysql = server(
    "mysql",
    "--branch-mysql-url-file",
    o.branchMysqlUrlFile as string | undefined,
    "--branch-mysql-advertise",
    o.branchMysqlAdvertise as string | undefined,
  );
  const pgChoice = provisionerChoice(
    "postgres",
    o.branchProvisionerPostgres as string | undefined,
    postgres,
    o.branchPodImagePostgres as string | undefined,
  );
  const mysqlChoice = provisionerChoice(
    "mysql",
    o.branchProvisionerMysql as string | undefined,
    mysql,
    o.branchPodImageMysql as string | undefined,
  );
  if (mode === "primary" && defaultCluster) {
    throw new OptionError(
      "--default-cluster",
      "a primary-only control plane serves no workloads; the Default is named by defaultCluster in the clusters config: drop the flag",
    );
  }
  const serverAliases = ((o.branchServerAliases as string | undefined) ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  return {
    defaultCluster,
    postgres: pgChoice.server,
    mysql: mysqlChoice.server,
    postgresPod: pgChoice.pod,
    mysqlPod: mysqlChoice.pod,
    serverAliases,
    clientBinDir: o.branchClientBinDir as string | undefined,
  };
}

export const branchingFlags: FeatureFlags<BranchingOptions> = { add, parse };
