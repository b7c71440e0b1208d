// Connection URLs of branch databases: the one a branch is reached with
// (`postgres://user:pass@host:port/db`, `mysql://…`), and the source URL a branch is made
// from (a `DATABASE_URL`-style variable of the target container) parsed into its parts.
// The password is a secret: it is percent-encoded into URLs but never appears in an
// error message, a redacted form, or an error's cause.
import {
  BRANCH_ENGINES,
  DATABASE_IDENTIFIER_PATTERN,
  type BranchKind,
} from "../../../proto/api/v1alpha1/index.js";

export const SOURCE_URL_INVALID = "SWITCHYARD_BRANCH_SOURCE_URL_INVALID";

/** URL schemes accepted per kind; the first is the one branch URLs are written with. */
export const URL_SCHEMES: Record<BranchKind, readonly string[]> = {
  PgBranchDatabase: ["postgres", "postgresql"],
  MysqlBranchDatabase: ["mysql", "mariadb"],
};

// What the CRD's explicit `spec.source.database` accepts (proto/api/v1alpha1): plain
// characters only, since the name reaches SQL statements of both engines.
const DATABASE_NAME = new RegExp(DATABASE_IDENTIFIER_PATTERN);

export interface DatabaseEndpoint {
  host: string;
  port: number;
  database: string;
  user: string;
  /** undefined: none in the URL (the server trusts the user, or a Secret supplies it). */
  password: string | undefined;
}

export interface SourceDatabase extends DatabaseEndpoint {
  /** Query parameters as written (e.g. `sslmode=require`), passed on when connecting to the source. */
  params: Readonly<Record<string, string>>;
}

/** A source URL that cannot be used. The message names `from` and the part at fault, never the password. */
export class SourceUrlError extends Error {
  readonly code = SOURCE_URL_INVALID;
  constructor(
    /** Where the URL came from, e.g. `environment variable DATABASE_URL of deployment/web`. */
    readonly from: string,
    readonly problem: string,
  ) {
    super(`${from}: ${problem}`);
    this.name = "SourceUrlError";
  }
}

/** `[::1]` for IPv6 literals, the host as is otherwise. */
function urlHost(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

/** The URL a branch is reached with; user, password and database are percent-encoded. */
export function branchConnectionUrl(kind: BranchKind, endpoint: DatabaseEndpoint): string {
  const scheme = URL_SCHEMES[kind][0];
  const enc = encodeURIComponent;
  const auth = enc(endpoint.user) + (endpoint.password === undefined ? "" : `:${enc(endpoint.password)}`);
  return `${scheme}://${auth}@${urlHost(endpoint.host)}:${endpoint.port}/${enc(endpoint.database)}`;
}

/** A source for logs and status: `postgres://app:***@db:5432/shop` (never the password). */
export function redactedUrl(kind: BranchKind, endpoint: DatabaseEndpoint): string {
  // `*` is left as is by encodeURIComponent.
  return branchConnectionUrl(kind, {
    ...endpoint,
    password: endpoint.password === undefined ? undefined : "***",
  });
}

function decode(from: string, part: string, text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    // Not the text itself: for the password that would be the secret.
    throw new SourceUrlError(
      from,
      `the ${part} is not valid percent-encoding: write a literal % as %25 in the URL`,
    );
  }
}

/**
 * Parses a source URL for a branch of `kind`. `from` names where it came from and leads
 * every error message. A port left out is the engine's default (5432, 3306).
 */
export function parseSourceUrl(kind: BranchKind, text: string, from: string): SourceDatabase {
  const bad = (problem: string) => new SourceUrlError(from, problem);
  if (/^jdbc:/i.test(text.trim()))
    throw new SourceUrlError(from, "is a JDBC URL (credentials in parameters): give a plain URL instead");
  const schemes = URL_SCHEMES[kind];
  const expected = `${schemes.map((s) => `${s}://`).join(" or ")} (a ${BRANCH_ENGINES[kind].product} URL)`;
  // Only a scheme followed by `//` is named: in `user:password@host` the part before the
  // first `:` is not a scheme, and what follows may be the secret.
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(text.trim())?.[1]?.toLowerCase();
  if (scheme === undefined) throw bad(`is not a URL: expected ${expected}`);
  if (!schemes.includes(scheme)) {
    throw bad(`scheme ${scheme}:// is not supported: expected ${expected}`);
  }
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    // URL's own error carries the input, password included: never chained.
    throw bad(
      `is not a valid URL after ${scheme}:// (check the host, the port and that @ : / in the password are percent-encoded)`,
    );
  }
  const rawHost = url.hostname;
  if (rawHost === "") throw bad("has no host: give the server's host name (Unix sockets are not supported)");
  if (rawHost.includes(","))
    throw bad("names several hosts: give one host (the primary server) to branch from");
  const host = rawHost.replace(/^\[(.*)\]$/, "$1");
  let port: number = BRANCH_ENGINES[kind].defaultPort;
  if (url.port !== "") {
    port = Number(url.port);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw bad("has a port that is not 1 to 65535");
  }
  const path = url.pathname.replace(/^\//, "");
  if (path === "") throw bad("has no database: add it as the path, e.g. /shop");
  if (path.includes("/"))
    throw bad("has a path with several segments: the path must be the database name only");
  const database = decode(from, "database", path);
  const max = BRANCH_ENGINES[kind].databaseMaxLength;
  if (!DATABASE_NAME.test(database) || database.length > max)
    throw bad(
      // Not echoed: an unencoded '/' in the password moves its tail into the path.
      `has a database name (the path) that is not supported: letters, digits, _ $ - only, at most ${max} ` +
        "characters (percent-encode / ? # @ in the password)",
    );
  if (url.username === "") throw bad("has no user: add it before the host, e.g. app@host");
  const user = decode(from, "user", url.username);
  const password = url.password === "" ? undefined : decode(from, "password", url.password);
  const params: Record<string, string> = {};
  for (const [k, v] of url.searchParams) {
    if (k === "password")
      throw bad("carries a password parameter: put the password before the host (user:password@)");
    if (k === "host" || k === "hostaddr" || k === "dbname" || k === "user")
      throw bad(`parameter ${k} overrides the URL's own part: write it in the URL instead`);
    params[k] = v;
  }
  return { host, port, database, user, password, params };
}
