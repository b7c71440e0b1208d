// The seed script of a MariaDB branch pod (the `pod` provisioner, branch-pod-objects.ts): a
// bash script the image's entrypoint runs once from /docker-entrypoint-initdb.d/, against its
// temporary server (socket only, no TCP), after it made MARIADB_DATABASE and MARIADB_USER
// with ALL on that database only, and before the real server listens — the contract of the
// official `mariadb` image, which runs an executable `*.sh` there as its own process with the
// entrypoint's exported environment (MARIADB_ROOT_PASSWORD among it) and `mariadb` on PATH.
//
// It runs the copy plan as the `server` provisioner streams it (mysql-copy-commands.ts): each
// step `mariadb-dump` of the source into `mariadb` on the temporary server, connected as root
// through the socket (the only account the contract gives a script), with every DEFINER
// clause on the way rewritten to the branch's own account by `sed` — the rule of
// mysql-definer-rewrite.ts, so copied views, triggers, routines and events run with the
// branch user's rights, never root's or the source user's. The branch database first gets the
// source's character set and collation.
//
// The script holds no secret: the source password reaches it in SWITCHYARD_SOURCE_PASSWORD
// (from the pod's seed Secret) and only the source's tools get it, in MYSQL_PWD; root's
// password is the entrypoint's MARIADB_ROOT_PASSWORD. Failure semantics are `set -Eeuo
// pipefail`: the first failing command ends the script with a last line naming the step, after
// the temporary server is killed (no shutdown lines push the tool's error out of the log's end)
// and its data directory emptied, so a restarted container initialises and seeds again and
// never serves a half-seeded database.
import type { BranchCreateRequest } from "../branch-provisioner.js";
import { redactedUrl } from "../connection-url.js";
import { MysqlBranchError } from "../mysql/mysql-branch-error.js";
import { DUMP_COMMON, mysqlStreamCommands } from "../mysql/mysql-copy-commands.js";
import { tlsMode, type TlsMode } from "../mysql/mysql-connection-options.js";
import { shellQuote, SOURCE_PASSWORD_ENV } from "./pg-pod-seed.js";

/** Both tools allow 1 GB packets, as the `server` provisioner's, so one large row never exceeds a limit. */
const MAX_PACKET = "--max-allowed-packet=1073741824";

/**
 * The sed (POSIX ERE) program of the definer rewrite: on every line that does not start with
 * `INSERT INTO ` (a dump's row lines), each `DEFINER=`user`@`host`` or `DEFINER=`role`` clause
 * (a backtick inside a name doubled) becomes `replacement`. Run with LC_ALL=C, so bytes that
 * are not valid in the locale pass as they are — the same rule as `rewriteDefinerLine`.
 */
export function definerSedProgram(replacement: string): string {
  const escaped = replacement.replace(/[\\&#\n]/g, (c) => (c === "\n" ? "\\n" : `\\${c}`));
  return "/^INSERT INTO /!s#DEFINER=`([^`]|``)*`(@`([^`]|``)*`)?#" + escaped + "#g";
}

/** The account copied objects are defined by: the branch user, at any host, as the contract makes it. */
export const branchDefiner = (user: string) => `DEFINER=\`${user.replaceAll("`", "``")}\`@\`%\``;

/** The client options of a source TLS mode, as the `server` provisioner's option files set them. */
function tlsArgs(tls: TlsMode | undefined): string[] {
  if (tls === "disabled") return ["--skip-ssl"];
  if (tls === "required") return ["--ssl", "--skip-ssl-verify-server-cert"];
  if (tls === "verify") return ["--ssl", "--ssl-verify-server-cert"];
  return [];
}

const PRELUDE = `set -Eeuo pipefail
# A consumer that stops early makes its producer fail (EPIPE), which pipefail reports.
trap '' PIPE
step="starting"
server_pid=""
seed_failed() {
  local status=$?
  [ "$status" -eq 0 ] && return 0
  # Never leave a half-seeded data directory behind for a restarted container to serve. The
  # temporary server is killed, not shut down: its shutdown lines would push the failing
  # tool's error out of the log's end, which the pod's termination message quotes.
  if [ -n "$server_pid" ]; then
    kill -KILL "$server_pid" 2>/dev/null || true
    for _ in {1..100}; do
      state=""
      read -r _ _ state _ 2>/dev/null </proc/"$server_pid"/stat || break
      [ "$state" = Z ] && break
      sleep 0.05
    done
  fi
  if [ -n "\${datadir:-}" ] && [ -d "$datadir" ]; then
    (shopt -s dotglob nullglob; rm -rf -- "$datadir"/*) 2>/dev/null || true
  fi
  echo "switchyard: seeding $MARIADB_DATABASE failed while $step (exit $status)" >&2
  return "$status"
}
trap seed_failed EXIT
# The temporary server, as root through its socket: the server configuration's, as the
# entrypoint's own client finds it (else the client's default).
socket=$({ mariadbd --verbose --help 2>/dev/null || true; } | sed -n -E '/^socket[[:space:]]/{s/^socket[[:space:]]+//p;q}')
branch_sql() {
  MYSQL_PWD="\${MARIADB_ROOT_PASSWORD:-}" mariadb --protocol=socket \${socket:+"--socket=$socket"} --user=root \\
    --batch --binary-mode ${MAX_PACKET} "$@"
}
# The source over TCP; no option file of the image adds to the connection.
source_sql() {
  MYSQL_PWD="$${SOURCE_PASSWORD_ENV}" mariadb --no-defaults "\${source_connection[@]}" --connect-timeout=20 \\
    --batch --skip-column-names --database="$source_db" "$@"
}
source_dump() {
  MYSQL_PWD="$${SOURCE_PASSWORD_ENV}" mariadb-dump --no-defaults "\${source_connection[@]}" \\
    ${DUMP_COMMON.join(" ")} ${MAX_PACKET} "$@"
}
rewrite_definers() {
  LC_ALL=C sed -E -e "$definer_program"
}
`;

const SERVER = `step="reading the temporary server's data directory"
server=$(branch_sql --skip-column-names -e 'SELECT @@datadir, @@pid_file')
IFS=$'\t' read -r datadir server_pid_file <<<"$server"
case "$server_pid_file" in /*) ;; *) server_pid_file="$datadir/$server_pid_file" ;; esac
server_pid=$(<"$server_pid_file")
`;

// The source's login and database are checked before anything is copied: a wrong password or
// a database the user may not see ends the script here, saying so.
const CHARSET = `step="reading the source database's character set"
facts=$(source_sql -e 'SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = DATABASE()')
read -r charset collation <<<"$facts" || true
if ! [[ "$charset" =~ ^[A-Za-z0-9_]+$ && "$collation" =~ ^[A-Za-z0-9_]+$ ]]; then
  echo "switchyard: the source database $source_db shows no character set to its user" >&2
  exit 1
fi
branch_sql -e "ALTER DATABASE \\\`$MARIADB_DATABASE\\\` CHARACTER SET $charset COLLATE $collation"
`;

/** The seed script of `request` (no secret inside: it may be shown, hashed and logged). */
export function mysqlSeedScript(request: BranchCreateRequest, dataDir = "/var/lib/mysql"): string {
  const { source, plan, copy } = request;
  const from = redactedUrl(request.kind, source);
  const commands = mysqlStreamCommands(plan, source.database);
  let tls: TlsMode | undefined;
  try {
    tls = tlsMode(source.params, `the source ${from}`);
  } catch (err) {
    throw new MysqlBranchError("SourceInvalid", (err as Error).message, "terminal");
  }
  const connection = [
    `--host=${source.host}`,
    `--port=${source.port}`,
    `--user=${source.user}`,
    "--protocol=tcp",
    ...tlsArgs(tls),
  ];
  return [
    "#!/bin/bash",
    `# Seeds the branch ${request.identifiers.database} of ${request.cr.namespace}/${request.cr.name}`,
    `# from ${from} (copy mode ${copy.mode}, ${copy.filters.length} row filters).`,
    PRELUDE,
    // Emptied on failure even before the server said where its data lives: the pod's data volume.
    `datadir=${shellQuote(dataDir)}`,
    `source_connection=(${connection.map(shellQuote).join(" ")})`,
    `source_db=${shellQuote(source.database)}`,
    `definer_program=${shellQuote(definerSedProgram(branchDefiner(request.identifiers.user)))}`,
    `echo "switchyard: seeding $MARIADB_DATABASE from "${shellQuote(from)}" (copy mode ${copy.mode})"`,
    SERVER,
    CHARSET,
    ...commands.flatMap((c) => [
      `step=${shellQuote(c.what === "everything" ? "copying everything" : `copying the ${c.what}`)}`,
      `source_dump ${c.args.map(shellQuote).join(" ")} | rewrite_definers | branch_sql "$MARIADB_DATABASE"`,
    ]),
    `step="finishing"`,
    `echo "switchyard: seeded $MARIADB_DATABASE in \${SECONDS} s"`,
    "",
  ].join("\n");
}
