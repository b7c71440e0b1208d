// The seed script of a Postgres branch pod (the `pod` provisioner, branch-pod-objects.ts):
// a bash script the image's entrypoint runs once from /docker-entrypoint-initdb.d/, against
// its temporary socket-only server, before the real server listens (the contract of the
// official `postgres` image). It runs the copy plan's steps in order — each the pipe the
// `server` provisioner streams (pg-stream-copy.ts), `pg_dump` into `psql`, or `COPY (SELECT
// …) TO STDOUT` into `COPY … FROM STDIN` — all on one snapshot the source exports while a
// transaction stays open, then moves owned sequences past the filtered rows.
//
// The script holds no secret: the source password reaches it in SWITCHYARD_SOURCE_PASSWORD
// (from the pod's seed Secret) and is given to the source's processes only, in PGPASSWORD.
// Failure semantics are `set -Eeuo pipefail`: the first failing command ends the script with
// a last line naming the step; the data directory is then wiped (the temporary server
// stopped first), so a restarted container initialises and seeds again and never serves a
// half-seeded database.
import type { BranchCreateRequest } from "../branch-provisioner.js";
import { redactedUrl } from "../connection-url.js";
import type { CopyStep } from "../copy-plan.js";
import { conninfo } from "../postgres/pg-client-tools.js";
import { pgQualifiedTable, pgStreamSteps, type PgCopyCommand } from "../postgres/pg-copy-commands.js";
import { OWNED_SEQUENCES_SQL } from "../postgres/pg-stream-copy.js";

/** Environment variable holding the source password inside the branch pod. */
export const SOURCE_PASSWORD_ENV = "SWITCHYARD_SOURCE_PASSWORD";

/** `'text'` for bash: nothing inside is expanded. */
export function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

const sqlLiteral = (text: string) => `'${text.replaceAll("'", "''")}'`;

function describe(step: CopyStep): string {
  switch (step.kind) {
    case "copySchema": {
      const which = step.tables === "all" ? "every table" : step.tables.map(pgQualifiedTable).join(", ");
      return step.section === "pre-data"
        ? `copying the schema of ${which}`
        : `copying the indexes, constraints and triggers of ${which}`;
    }
    case "copyAllRows":
      return "copying every table and row";
    case "copyRows":
      return `copying the rows of ${step.field} (${pgQualifiedTable(step.table)} where ${step.where})`;
    case "createDatabase":
      return "creating the database";
  }
}

const PRELUDE = `set -Eeuo pipefail
# A consumer that stops early makes its producer fail (EPIPE), which pipefail reports.
trap '' PIPE
export PGCONNECT_TIMEOUT=20
step="starting"
snapshot=""
snap_pid=""
seed_failed() {
  local status=$?
  [ "$status" -eq 0 ] && return 0
  echo "switchyard: seeding $POSTGRES_DB failed while $step (exit $status)" >&2
  [ -n "$snap_pid" ] && kill "$snap_pid" 2>/dev/null
  # Never leave a half-seeded data directory behind for a restarted container to serve.
  if [ -n "\${PGDATA:-}" ]; then
    pg_ctl -D "$PGDATA" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$PGDATA" 2>/dev/null || true
  fi
  return "$status"
}
trap seed_failed EXIT
branch_psql() {
  psql -X -q -v ON_ERROR_STOP=1 --no-password --username="$POSTGRES_USER" --dbname="$POSTGRES_DB" "$@"
}
source_psql() {
  PGPASSWORD="$${SOURCE_PASSWORD_ENV}" psql -X -q -v ON_ERROR_STOP=1 --no-password --dbname="$source_db" "$@"
}
source_dump() {
  PGPASSWORD="$${SOURCE_PASSWORD_ENV}" pg_dump --format=plain --no-password --no-tablespaces \\
    --no-security-labels --dbname="$source_db" \${snapshot:+"--snapshot=$snapshot"} "$@"
}
`;

// One transaction on the source, open until the script ends, exports the snapshot every
// step reads. A source that cannot export one (a login failure included: the first step
// then reports it) leaves each step to read its own.
const SNAPSHOT = `step="exporting a snapshot of the source"
coproc SNAPSHOT { PGPASSWORD="$${SOURCE_PASSWORD_ENV}" exec psql -X -q -A -t --no-password --dbname="$source_db" 2>/dev/null; }
snap_out=\${SNAPSHOT[0]} snap_in=\${SNAPSHOT[1]} snap_pid=$SNAPSHOT_PID
echo "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT pg_export_snapshot();" >&"$snap_in" || true
for _ in 1 2 3; do
  IFS= read -r -t 60 line <&"$snap_out" || break
  if [[ "$line" =~ ^[0-9A-Fa-f]+-[0-9A-Fa-f]+(-[0-9]+)?$ ]]; then snapshot=$line; break; fi
done
in_snapshot=()
if [ -n "$snapshot" ]; then
  in_snapshot=(-c "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" -c "SET TRANSACTION SNAPSHOT '$snapshot'")
else
  echo "switchyard: the source exported no snapshot; each step reads its own" >&2
fi
`;

function stepLines({ step, command }: { step: CopyStep; command: PgCopyCommand }): string[] {
  if (command.tool === "none") return [];
  const run =
    command.tool === "pg_dump"
      ? `source_dump ${command.args.map(shellQuote).join(" ")} | branch_psql`
      : `source_psql "\${in_snapshot[@]}" -c ${shellQuote(command.source)} | branch_psql -c ${shellQuote(command.branch)}`;
  return [`step=${shellQuote(describe(step))}`, run];
}

/** Moves each sequence owned by a filtered table past the rows copied (pg-stream-copy.ts rule). */
function sequenceLines(filtered: readonly Extract<CopyStep, { kind: "copyRows" }>[]): string[] {
  if (filtered.length === 0) return [];
  const tables = filtered.map((f) => sqlLiteral(pgQualifiedTable(f.table))).join(", ");
  return [
    `step="moving sequences past the copied rows"`,
    "branch_psql >/dev/null <<'SQL'",
    "CREATE FUNCTION pg_temp.owned_sequences(text[])",
    "  RETURNS TABLE (seq text, tbl text, col text, ascending boolean, bound text)",
    "  LANGUAGE sql AS $owned$",
    OWNED_SEQUENCES_SQL,
    "$owned$;",
    "SELECT format('SELECT pg_catalog.setval(%L::regclass, v) FROM (SELECT %s(%s) AS v FROM %s) x " +
      "WHERE v IS NOT NULL AND v %s %s', seq, CASE WHEN ascending THEN 'max' ELSE 'min' END, col, tbl, " +
      "CASE WHEN ascending THEN '>=' ELSE '<=' END, bound)",
    `  FROM pg_temp.owned_sequences(ARRAY[${tables}]::text[]) \\gexec`,
    "SQL",
  ];
}

/** The seed script of `request` (no secret inside: it may be shown, hashed and logged). */
export function pgSeedScript(request: BranchCreateRequest): string {
  const { source, plan, copy } = request;
  const from = redactedUrl(request.kind, source);
  const filtered = plan.filter((s): s is Extract<CopyStep, { kind: "copyRows" }> => s.kind === "copyRows");
  const steps = pgStreamSteps(plan);
  const copies = steps.length > 0;
  return [
    "#!/bin/bash",
    `# Seeds the branch ${request.identifiers.database} of ${request.cr.namespace}/${request.cr.name}`,
    `# from ${from} (copy mode ${copy.mode}, ${copy.filters.length} row filters).`,
    PRELUDE,
    `source_db=${shellQuote(conninfo(source))}`,
    `echo "switchyard: seeding $POSTGRES_DB from "${shellQuote(from)}" (copy mode ${copy.mode})"`,
    ...(copies ? [SNAPSHOT] : []),
    ...steps.flatMap(stepLines),
    ...sequenceLines(filtered),
    `step="finishing"`,
    ...(copies ? ["exec {snap_in}>&-", 'wait "$snap_pid" 2>/dev/null || true', 'snap_pid=""'] : []),
    `echo "switchyard: seeded $POSTGRES_DB in \${SECONDS} s"`,
    "",
  ].join("\n");
}
