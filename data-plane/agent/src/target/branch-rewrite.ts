// The DB-branch rewrite of the target's environment (DESIGN §7): a connection URL variable
// such as DATABASE_URL is pointed at a database branch, so the local app connects to the
// branch with a stock driver and never to the source database.
//
// Two forms. The complete one (EnvGet.branches) replaces database, user, password, host
// and port and keeps the scheme and query parameters; the variable must exist and hold a
// postgres://, postgresql://, mysql:// or mariadb:// URL, else the answer is an error
// naming the variable and the fix. The older one (EnvGet fields 4/5, or the session's
// secrets-file entry) replaces only the database name and leaves a missing variable alone.
//
// Neither the branch's password nor the variable's current value (which holds the source
// database's password) ever appears in an error message.
import { ErrorCode } from "../../../../proto/error-codes.js";
import type * as pb from "../../../../proto/gen/session_pb.js";
import { EnvResolveError, type ResolvedEnv } from "./env-resolver.js";

/** The older form: only the database name in the URL's path is replaced. */
export interface BranchDatabaseRewrite {
  /** Variable holding the database URL, e.g. DATABASE_URL. */
  variable: string;
  /** Name of the branch database to point it at. */
  branch: string;
}

/** The complete form: EnvGet's BranchRewrite message (the password is never logged). */
export type BranchRewrite = Omit<pb.BranchRewrite, "$typeName" | "$unknown">;

/** Schemes of the URLs a branch rewrite accepts (what the Postgres and MySQL drivers read). */
export const BRANCH_URL_SCHEMES = ["postgres:", "postgresql:", "mysql:", "mariadb:"] as const;

const unsupported = (message: string) => new EnvResolveError(ErrorCode.ENV_UNSUPPORTED, message);

/** Points `rewrite.variable`'s URL path at the branch database; a missing variable is left alone. */
export function rewriteBranchDatabase(env: ResolvedEnv, rewrite: BranchDatabaseRewrite): ResolvedEnv {
  const current = env.get(rewrite.variable);
  if (current === undefined) return env;
  const out = new Map(env);
  try {
    const url = new URL(current);
    url.pathname = `/${encodeURIComponent(rewrite.branch)}`;
    out.set(rewrite.variable, url.toString());
  } catch {
    throw unsupported(
      `${rewrite.variable} is not a URL, so it cannot be pointed at branch ${rewrite.branch}`,
    );
  }
  return out;
}

/** Checks what the client sent before anything is rewritten; names the field. */
function checkRewrite(r: BranchRewrite, i: number): void {
  const where = `branches[${i}]`;
  if (!r.variable) throw unsupported(`${where}.variable is empty: name the URL variable, e.g. DATABASE_URL`);
  const missing = (["database", "user", "host"] as const).filter((k) => !r[k]);
  if (missing.length > 0)
    throw unsupported(
      `${where} (${r.variable}) has no ${missing.join(", ")}: the branch's credentials are incomplete; ` +
        "wait until the branch is Ready and read its Secret again",
    );
  if (!Number.isInteger(r.port) || r.port < 1 || r.port > 65535)
    throw unsupported(`${where} (${r.variable}) port ${r.port} must be 1-65535`);
}

/** One URL with the branch's database, user, password, host and port; scheme and query kept. */
function pointAtBranch(variable: string, current: string, r: BranchRewrite): string {
  let url: URL | undefined;
  try {
    url = new URL(current);
  } catch {
    url = undefined;
  }
  const schemes: readonly string[] = BRANCH_URL_SCHEMES;
  if (!url || !schemes.includes(url.protocol) || !url.hostname)
    throw unsupported(
      `${variable} is not a database URL with a host (postgres://, postgresql://, mysql:// or mariadb://, ` +
        `e.g. postgres://user:password@db:5432/app), so it cannot be pointed at the branch: ` +
        `set ${variable} in the target to such a URL, or branch the variable that holds one`,
    );
  url.hostname = r.host.includes(":") && !r.host.startsWith("[") ? `[${r.host}]` : r.host;
  url.port = String(r.port);
  url.username = encodeURIComponent(r.user);
  url.password = encodeURIComponent(r.password);
  url.pathname = `/${encodeURIComponent(r.database)}`;
  return url.toString();
}

/** Applies every rewrite, in order; the input is left untouched. */
export function rewriteBranches(env: ResolvedEnv, rewrites: readonly BranchRewrite[]): ResolvedEnv {
  if (rewrites.length === 0) return env;
  const out = new Map(env);
  rewrites.forEach((r, i) => {
    checkRewrite(r, i);
    const current = out.get(r.variable);
    if (current === undefined)
      throw new EnvResolveError(
        ErrorCode.ENV_KEY_NOT_FOUND,
        `the target has no variable ${r.variable} to point at the branch: set envVar of the branch ` +
          "(switchyard.json branches[].envVar) to the target's connection URL variable, e.g. DATABASE_URL",
      );
    out.set(r.variable, pointAtBranch(r.variable, current, r));
  });
  return out;
}
