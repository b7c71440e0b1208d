// How the MySQL/MariaDB provisioner connects: the branch server's admin URL parsed into its
// parts, a source URL's TLS parameters, and the option files that give `mariadb-dump` and
// `mariadb` their connection. Passwords never reach a command line (any user on the host
// can read argv): each tool gets `--defaults-file=<file>`, a file of mode 0600 in a private
// directory (mode 0700) that is removed when the step ends. `--defaults-file` rather than
// `--defaults-extra-file`, so no my.cnf of the host or the user's home adds options;
// rather than MYSQL_PWD, which MySQL's own clients deprecate.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ConnectionOptions } from "mysql2/promise";
import { OptionError } from "../../../../lib/option-error.js";
import { URL_SCHEMES } from "../connection-url.js";

export type TlsMode = "disabled" | "required" | "verify";

/** One server to connect to, as the tools and the driver need it. */
export interface MysqlEndpoint {
  host: string;
  port: number;
  user: string;
  password: string | undefined;
  /** undefined: the client's default (MariaDB 10.11: no TLS). */
  tls?: TlsMode | undefined;
}

const DEFAULT_PORT = 3306;

/** Parses `mysql://user:password@host:port/` (the branch server's admin); errors name `option`, never the password. */
export function parseAdminUrl(text: string, option: string): MysqlEndpoint {
  const schemes = URL_SCHEMES.MysqlBranchDatabase;
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(text.trim())?.[1]?.toLowerCase();
  if (scheme === undefined || !schemes.includes(scheme))
    throw new OptionError(option, `must be a ${schemes.map((s) => `${s}://`).join(" or ")} URL`);
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    throw new OptionError(option, "is not a valid URL (percent-encode @ : / in the password)");
  }
  if (url.hostname === "") throw new OptionError(option, "has no host");
  if (url.username === "")
    throw new OptionError(option, "has no user: write mysql://user:password@host:port/");
  if (url.pathname !== "" && url.pathname !== "/")
    throw new OptionError(
      option,
      "names a database: the admin URL is the server only, e.g. mysql://admin:pw@host:3306/",
    );
  const port = url.port === "" ? DEFAULT_PORT : Number(url.port);
  let user: string;
  let password: string | undefined;
  try {
    user = decodeURIComponent(url.username);
    password = url.password === "" ? undefined : decodeURIComponent(url.password);
  } catch {
    throw new OptionError(option, "has a user or password that is not valid percent-encoding");
  }
  const params = Object.fromEntries(url.searchParams);
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port,
    user,
    password,
    tls: tlsMode(params, option),
  };
}

// The spellings of drivers and frameworks for the same thing (Connector/J `sslMode`, Rails
// `ssl_mode`, libpq-style `sslmode`, the clients' `ssl-mode`; `ssl`, `useSSL`, Go's `tls`).
const MODE_KEYS = ["ssl-mode", "ssl_mode", "sslmode", "sslMode"];
const FLAG_KEYS = ["ssl", "useSSL", "tls"];

/**
 * The TLS a URL's parameters ask for; undefined when none does. Other parameters are
 * driver settings (pool sizes, charsets) that a dump does not need and are left out.
 */
export function tlsMode(params: Readonly<Record<string, string>>, from: string): TlsMode | undefined {
  for (const key of MODE_KEYS) {
    const v = params[key]?.toLowerCase().replace(/-/g, "_");
    if (v === undefined) continue;
    if (v === "disabled" || v === "disable" || v === "preferred" || v === "prefer" || v === "allow")
      return v.startsWith("disable") ? "disabled" : undefined;
    if (v === "required" || v === "require") return "required";
    if (v === "verify_ca" || v === "verify_identity" || v === "verify_full") return "verify";
    throw new OptionError(
      `${from} parameter ${key}`,
      "must be disabled, preferred, required, verify_ca or verify_identity",
    );
  }
  for (const key of FLAG_KEYS) {
    const v = params[key]?.toLowerCase();
    if (v === undefined) continue;
    if (v === "false" || v === "0") return "disabled";
    if (v === "preferred") return undefined;
    if (v === "skip-verify") return "required";
    if (v === "true" || v === "1") return "verify";
    throw new OptionError(`${from} parameter ${key}`, "must be true, false, preferred or skip-verify");
  }
  return undefined;
}

/** mysql2's options for `endpoint` (and `database`). */
export function driverOptions(endpoint: MysqlEndpoint, database?: string): ConnectionOptions {
  const ssl =
    endpoint.tls === "required"
      ? { ssl: { rejectUnauthorized: false } }
      : endpoint.tls === "verify"
        ? { ssl: {} }
        : {};
  return {
    host: endpoint.host,
    port: endpoint.port,
    user: endpoint.user,
    password: endpoint.password ?? "",
    ...(database === undefined ? {} : { database }),
    ...ssl,
    // Every statement is one statement: a row filter can never start another.
    multipleStatements: false,
    connectTimeout: 10_000,
  };
}

/** A value in an option file: double-quoted, so `#` and spaces are literal; `\` `"` and control characters escaped. */
export function optionFileValue(value: string): string {
  const escaped = value.replace(/[\\"\n\r\t\b]/g, (c) =>
    c === "\n" ? "\\n" : c === "\r" ? "\\r" : c === "\t" ? "\\t" : c === "\b" ? "\\b" : `\\${c}`,
  );
  return `"${escaped}"`;
}

/** The `[client]` group both tools read: the endpoint over TCP (never a local socket). */
export function optionFileText(endpoint: MysqlEndpoint): string {
  const lines = [
    "[client]",
    `host=${optionFileValue(endpoint.host)}`,
    `port=${endpoint.port}`,
    `user=${optionFileValue(endpoint.user)}`,
    "protocol=tcp",
  ];
  if (endpoint.password !== undefined) lines.push(`password=${optionFileValue(endpoint.password)}`);
  if (endpoint.tls === "disabled") lines.push("skip-ssl");
  if (endpoint.tls === "required") lines.push("ssl", "skip-ssl-verify-server-cert");
  if (endpoint.tls === "verify") lines.push("ssl", "ssl-verify-server-cert");
  return `${lines.join("\n")}\n`;
}

/** A private directory of option files; `dispose()` removes it and every file in it. */
export class OptionFiles {
  #count = 0;
  private constructor(readonly dir: string) {}

  static async create(): Promise<OptionFiles> {
    // mkdtemp makes the directory with mode 0700.
    return new OptionFiles(await mkdtemp(join(tmpdir(), "switchyard-mysql-")));
  }

  /** Writes `endpoint` to a new file (mode 0600) and returns the argument that names it. */
  async defaultsFileArg(endpoint: MysqlEndpoint): Promise<string> {
    const file = join(this.dir, `client-${++this.#count}.cnf`);
    await writeFile(file, optionFileText(endpoint), { mode: 0o600, flag: "wx" });
    return `--defaults-file=${file}`;
  }

  async dispose(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
