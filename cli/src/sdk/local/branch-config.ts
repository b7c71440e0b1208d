// Database branches in `switchyard.json` (DESIGN §7): each entry asks for a throwaway
// branch of the database whose URL the target holds in `envVar`, as a PgBranchDatabase or
// MysqlBranchDatabase the CLI creates on the Primary before the session. Each entry is
// checked here against the CRD's own schema (the same patterns, lengths and bounds the API
// server enforces) and against its CEL rules, so a mistake is named by its field in the
// file before anything is created.
import type { TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { z } from "zod";
import {
  BRANCH_ENGINES,
  COPY_MODES,
  ConnectParams,
  DatabaseBranchRef,
  mysqlBranchDatabaseCrd,
  pgBranchDatabaseCrd,
  type BranchDatabaseSpec,
  type BranchKind,
} from "../../../../proto/api/v1alpha1/index.js";

/** `engine` in the file → the kind of the branch CR (MariaDB is served by the MySQL kind). */
export const BRANCH_ENGINE_KINDS = {
  postgres: "PgBranchDatabase",
  mysql: "MysqlBranchDatabase",
} as const satisfies Record<string, BranchKind>;
export type BranchEngineName = keyof typeof BRANCH_ENGINE_KINDS;

/** Seconds the CLI waits for every branch to be Ready (`branchTimeoutSeconds`). */
export const BRANCH_TIMEOUT_SECONDS_DEFAULT = 120;
export const BRANCH_TIMEOUT_SECONDS_MIN = 1;
export const BRANCH_TIMEOUT_SECONDS_MAX = 3600;

/** As many branches as a session's connectParams can name. */
export const BRANCHES_MAX: number = ConnectParams.properties.databaseBranches.maxItems ?? 16;

/** One entry of `branches` as written; limits are checked against the CRD afterwards. */
export const BranchConfigEntry = z.strictObject({
  envVar: z.string(),
  engine: z.enum(Object.keys(BRANCH_ENGINE_KINDS) as [BranchEngineName, ...BranchEngineName[]]),
  id: z.string().optional(),
  source: z
    .strictObject({
      host: z.string().optional(),
      port: z.number().int().optional(),
      database: z.string().optional(),
      user: z.string().optional(),
      passwordSecretRef: z.strictObject({ name: z.string(), key: z.string() }).optional(),
    })
    .optional(),
  copy: z
    .strictObject({
      mode: z.enum(COPY_MODES).optional(),
      filters: z.array(z.strictObject({ table: z.string(), where: z.string() })).optional(),
    })
    .optional(),
  ttlSeconds: z.number().int().optional(),
});
export type BranchConfigEntry = z.infer<typeof BranchConfigEntry>;

/** A validated branch the session asks for. */
export interface BranchRequest {
  /** The target's variable holding the source URL, rewritten by the Default agent. */
  envVar: string;
  kind: BranchKind;
  /** Shared branch id: sessions naming it in the namespace share one CR `branch-<id>`. */
  id?: string;
  /** The branch CR's spec as the CLI creates it. */
  spec: BranchDatabaseSpec;
  /** Where the entry was written, for messages: `switchyard.json: branches[0]`. */
  field: string;
}

/** `DATABASE_URL` → `database-url`: the part of a session's branch name taken from its variable. */
export function envVarSlug(envVar: string): string {
  return (
    envVar
      .toLowerCase()
      .replace(/_/g, "-")
      .replace(/^-+|-+$/g, "") || "branch"
  );
}

/** Name of the branch CR: `branch-<id>` when shared, else `<session>-<envVar slug>`. */
export function branchObjectName(r: Pick<BranchRequest, "envVar" | "id">, sessionName: string): string {
  return r.id ? `branch-${r.id}` : `${sessionName}-${envVarSlug(r.envVar)}`;
}

const crdOf = (kind: BranchKind) =>
  kind === "PgBranchDatabase" ? pgBranchDatabaseCrd : mysqlBranchDatabaseCrd;

/** What a schema node accepts, in words: "1-63 characters matching ^…$", "30 to 86400". */
function expectation(s: TSchema): string {
  if (Array.isArray(s.anyOf))
    return `one of ${s.anyOf.map((x: TSchema) => JSON.stringify(x.const)).join(", ")}`;
  if (s.type === "integer" || s.type === "number") {
    const range =
      s.minimum !== undefined && s.maximum !== undefined
        ? ` from ${s.minimum} to ${s.maximum}`
        : s.minimum !== undefined
          ? ` of at least ${s.minimum}`
          : "";
    return `a whole number${range}`;
  }
  if (s.type === "string")
    return `${s.minLength ?? 0}-${s.maxLength ?? "any"} characters${s.pattern ? ` matching ${s.pattern}` : ""}`;
  if (s.type === "array") return `a list of ${s.minItems ?? 0} to ${s.maxItems ?? "any"} entries`;
  return `a valid ${String(s.type ?? "value")}`;
}

/** `/copy/filters/0/where` → `copy.filters[0].where`. */
const fieldOfPath = (path: string): string =>
  path
    .split("/")
    .filter(Boolean)
    .map((p) => (/^\d+$/.test(p) ? `[${p}]` : `.${p}`))
    .join("")
    .replace(/^\./, "");

/** A value as messages quote it: strings JSON-quoted and cut, anything else as JSON. */
const shown = (v: unknown): string => {
  if (typeof v !== "string") return (JSON.stringify(v) ?? String(v)).slice(0, 60);
  return JSON.stringify(v.length > 60 ? `${v.slice(0, 60)}…` : v);
};

/**
 * Validates the file's `branches` for a session on `target`; errors name `source`, the
 * entry and the field, with the limit or the fix.
 */
export function resolveBranches(
  entries: readonly BranchConfigEntry[],
  target: string,
  bad: (field: string, message: string) => Error,
): BranchRequest[] {
  if (entries.length > BRANCHES_MAX)
    throw bad("branches", `lists ${entries.length} branches; a session can use at most ${BRANCHES_MAX}`);
  const out: BranchRequest[] = [];
  const byVar = new Map<string, number>();
  const bySlug = new Map<string, number>();
  const byId = new Map<string, number>();
  entries.forEach((e, i) => {
    const at = `branches[${i}]`;
    const kind = BRANCH_ENGINE_KINDS[e.engine];
    const envErr = Value.Errors(DatabaseBranchRef.properties.envVar, e.envVar).First();
    if (envErr)
      throw bad(
        `${at}.envVar`,
        `${shown(e.envVar)} must be an environment variable name, ${expectation(envErr.schema)}, e.g. DATABASE_URL`,
      );
    const spec: BranchDatabaseSpec = {
      target,
      source: e.source ?? { fromEnv: { name: e.envVar } },
      ...(e.copy ? { copy: e.copy } : {}),
      ...(e.ttlSeconds !== undefined ? { ttlSeconds: e.ttlSeconds } : {}),
      ...(e.id !== undefined ? { id: e.id } : {}),
    };
    const err = Value.Errors(crdOf(kind).spec, spec).First();
    if (err) {
      const field = fieldOfPath(err.path);
      if (field === "target")
        throw bad("target", `${shown(target)} cannot be a branch's target: ${err.message}`);
      throw bad(
        `${at}.${field}`,
        `${shown(err.value)} must be ${expectation(err.schema)} (what ${kind} accepts)`,
      );
    }
    if (e.source) {
      const missing = (["host", "database", "user"] as const).filter((k) => e.source![k] === undefined);
      if (missing.length > 0)
        throw bad(
          `${at}.source`,
          `an explicit source needs ${missing.join(", ")} (host, database and user; port defaults to ` +
            `${BRANCH_ENGINES[kind].defaultPort}, passwordSecretRef is optional); or leave source out to ` +
            `branch the database whose URL the target holds in ${e.envVar}`,
        );
    }
    if (e.copy?.filters && e.copy.mode === "all")
      throw bad(
        `${at}.copy.filters`,
        'only goes with copy.mode "empty" or "schema" (mode "all" copies every row): remove the filters or change the mode',
      );
    const twice = (seen: Map<string, number>, key: string, what: string) => {
      const first = seen.get(key);
      if (first !== undefined) throw bad(at, `${what} as branches[${first}]; ${whatFix(what)}`);
      seen.set(key, i);
    };
    twice(byVar, e.envVar, `names envVar ${e.envVar} again`);
    if (e.id === undefined)
      twice(bySlug, envVarSlug(e.envVar), `gets the same branch name (${envVarSlug(e.envVar)})`);
    else twice(byId, `${kind}/${e.id}`, `uses id ${e.id} for the same engine`);
    out.push({
      envVar: e.envVar,
      kind,
      ...(e.id !== undefined ? { id: e.id } : {}),
      spec,
      field: at,
    });
  });
  return out;
}

function whatFix(what: string): string {
  if (what.startsWith("names envVar")) return "each variable can point at one branch only: remove one entry";
  if (what.startsWith("gets the same")) return "give one of them an id, or branch another variable";
  return "a shared branch is listed once: remove one entry or give it another id";
}
