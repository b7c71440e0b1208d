// The session configuration a developer writes once (`switchyard.json`) and overrides with
// flags. `{"target": "deployment/myapp"}` is a complete file: everything else has a
// default, and nothing in it names clusters (the operator's configuration decides).
// Flags win over the file; the result is validated once with errors naming the field.
import { readFileSync } from "node:fs";
import { z } from "zod";
import { parseTarget, TTL_SECONDS_MAX, type SqsQueueSplit } from "../../../../proto/api/v1alpha1/index.js";
import { CliError, CliErrorCode } from "../cli-errors.js";
import { filterFromFlags, type HttpFilterNames, type HttpFilterSpec } from "../session/http-filter.js";
import {
  BRANCH_TIMEOUT_SECONDS_DEFAULT,
  BRANCH_TIMEOUT_SECONDS_MAX,
  BRANCH_TIMEOUT_SECONDS_MIN,
  BranchConfigEntry,
  resolveBranches,
  type BranchRequest,
} from "./branch-config.js";
import { QueueConfigEntry, resolveQueues } from "./queue-config.js";

const PortSpec = z.union([z.number().int(), z.string()]);
/** Shortest TTL the CLI asks for: below its heartbeat period a session would expire while in use. */
const TTL_SECONDS_MIN_CLI = 10;

export const SessionConfigFile = z.strictObject({
  target: z.string().min(1).optional(),
  namespace: z.string().min(1).optional(),
  context: z.string().min(1).optional(),
  kubeconfig: z.string().min(1).optional(),
  /** Router URL override (default: the operator's status.routerEndpoint). */
  router: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]).optional(),
  /** PEM file of the CA that signed the routers' certificate. */
  routerCa: z.string().min(1).optional(),
  mode: z.enum(["mirror", "steal"]).optional(),
  ports: z.array(PortSpec).optional(),
  httpFilter: z
    .strictObject({
      headers: z.array(z.string()).optional(),
      path: z.string().optional(),
      method: z.string().optional(),
      match: z.enum(["all", "any"]).optional(),
    })
    .optional(),
  env: z
    .strictObject({
      include: z.array(z.string()).optional(),
      exclude: z.array(z.string()).optional(),
    })
    .optional(),
  ttlSeconds: z.number().int().min(TTL_SECONDS_MIN_CLI).max(TTL_SECONDS_MAX).optional(),
  failurePolicy: z.enum(["AllOrNothing", "BestEffort"]).optional(),
  /** Give the process a SOCKS5/HTTP proxy through the Default cluster (default true). */
  proxy: z.boolean().optional(),
  /** How the command reaches the Default cluster (../transparent): its network, DNS and files. */
  network: z
    .strictObject({
      mode: z.enum(["auto", "transparent", "proxy"]).optional(),
      /** Addresses or CIDRs the command reaches from this machine, not through the cluster. */
      keepLocal: z.array(z.string()).optional(),
      /** Container paths shown to the command besides the target's volume mounts. */
      files: z.array(z.string().regex(/^\//, "must be an absolute path")).optional(),
    })
    .optional(),
  /** Database branches the session uses (branch-config.ts). */
  branches: z.array(BranchConfigEntry).optional(),
  /** Seconds to wait for every branch to be Ready (default 120). */
  branchTimeoutSeconds: z
    .number()
    .int()
    .min(BRANCH_TIMEOUT_SECONDS_MIN)
    .max(BRANCH_TIMEOUT_SECONDS_MAX)
    .optional(),
  /** SQS queues split between the session and the deployed consumers (queue-config.ts). */
  queues: z.array(QueueConfigEntry).optional(),
});
export type SessionConfigFile = z.infer<typeof SessionConfigFile>;

/** What flags can set; undefined means "not given". */
export interface SessionFlags {
  target?: string;
  namespace?: string;
  context?: string;
  kubeconfig?: string;
  router?: string[];
  routerCa?: string;
  steal?: boolean;
  mirror?: boolean;
  port?: string[];
  httpHeader?: string[];
  httpPath?: string;
  httpMethod?: string;
  httpMatch?: string;
  envInclude?: string[];
  envExclude?: string[];
  ttl?: string;
  proxy?: boolean;
  network?: string;
  keepLocal?: string[];
  files?: string[];
}

export interface PortMapping {
  /** The target's port in the cluster. */
  remote: number;
  /** The local process's port. */
  local: number;
}

export interface SessionConfig {
  target: string;
  namespace?: string;
  context?: string;
  kubeconfig?: string;
  router: string[];
  routerCa?: string;
  mode: "mirror" | "steal";
  ports: PortMapping[];
  httpFilter?: HttpFilterSpec;
  envInclude: string[];
  envExclude: string[];
  ttlSeconds?: number;
  failurePolicy?: "AllOrNothing" | "BestEffort";
  proxy: boolean;
  /**
   * auto: transparent where the machine allows it, else the proxy (said in one line);
   * transparent: the namespaces or an error; proxy: the SOCKS5/HTTP proxy variables only.
   */
  network: "auto" | "transparent" | "proxy";
  /** Addresses/CIDRs kept on this machine under the transparent network. */
  keepLocal: string[];
  /** Container paths shown besides the target's mounts under the transparent network. */
  files: string[];
  /** Database branches, created before the session (empty: none). */
  branches: BranchRequest[];
  /** Seconds to wait for every branch to be Ready. */
  branchTimeoutSeconds: number;
  /** SQS queue splits, the session's connectParams.sqsSplit (empty: none). */
  queues: SqsQueueSplit[];
}

function invalid(message: string): CliError {
  return new CliError(CliErrorCode.CONFIG_INVALID, message);
}

// Messages are one line and short whatever the file holds: no raw newline or terminal escape,
// long values cut.
const oneLine = (s: string): string =>
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is escaped
  s.replace(/[\u0000-\u001f\u007f]/g, (c) => JSON.stringify(c).slice(1, -1));
const cut = (s: string, max = 200): string => oneLine(s.length > max ? `${s.slice(0, max)}…` : s);
const shortKey = (k: string): string => cut(k, 60);
/** A value as messages quote it (JSON escapes keep it on one line). */
const shown = (v: unknown): string => {
  const text = String(v);
  return JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}…` : text);
};

/** Parses `8080` or `8080:3000` (target port : local port). */
export function parsePortMapping(spec: string | number): PortMapping {
  const m = /^(\d{1,5})(?::(\d{1,5}))?$/.exec(String(spec).trim());
  const remote = m ? Number(m[1]) : NaN;
  const local = m?.[2] ? Number(m[2]) : remote;
  if (!m || remote < 1 || remote > 65535 || local < 1 || local > 65535)
    throw invalid(
      `port ${shown(spec)} must be PORT or PORT:LOCALPORT with ports 1-65535, e.g. 8080 or 8080:3000`,
    );
  return { remote, local };
}

/** Reads and validates a config file; the message names the file and the bad field. */
export function readConfigFile(path: string): SessionConfigFile {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw invalid(`cannot read config file ${path}: ${(err as Error).message}`);
  }
  return parseConfigText(text, path);
}

export function parseConfigText(text: string, source = "config"): SessionConfigFile {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw invalid(`${source} is not valid JSON: ${oneLine((err as Error).message).slice(0, 200)}`);
  }
  const r = SessionConfigFile.safeParse(json);
  if (!r.success) {
    const issues = r.error.issues
      .slice(0, 5)
      .map(
        (i) => `${i.path.length ? i.path.map(String).map(shortKey).join(".") : "(root)"}: ${cut(i.message)}`,
      )
      .join("; ");
    const more = r.error.issues.length > 5 ? ` (and ${r.error.issues.length - 5} more)` : "";
    throw invalid(
      `${source} is not a valid switchyard config: ${oneLine(issues)}${more}; fields: ${Object.keys(SessionConfigFile.shape).join(", ")}`,
    );
  }
  return r.data;
}

/** Flags over file over defaults, validated; errors about the file's values name `source` and the field. */
export function resolveConfig(
  file: SessionConfigFile,
  flags: SessionFlags,
  source = "switchyard.json",
): SessionConfig {
  /** A problem with a value from the file (`field` set) or from a flag (message names the flag). */
  const bad = (field: string | undefined, message: string) =>
    invalid(field === undefined ? message : `${source}: ${field}: ${message}`);
  const target = flags.target ?? file.target;
  if (!target)
    throw invalid(
      'no target: pass -t deployment/<name> or put {"target": "deployment/<name>"} in switchyard.json (-f)',
    );
  try {
    parseTarget(target);
  } catch (err) {
    throw bad(flags.target === undefined ? "target" : undefined, (err as Error).message);
  }
  if (flags.steal && flags.mirror) throw invalid("--steal and --mirror exclude each other; pick one");
  const mode = flags.steal ? "steal" : flags.mirror ? "mirror" : (file.mode ?? "mirror");
  const modeFromFile = !flags.steal && !flags.mirror && file.mode !== undefined;
  const portsFromFlags = !!flags.port?.length;
  const ports = (portsFromFlags ? flags.port! : (file.ports ?? [])).map((spec, i) => {
    try {
      return parsePortMapping(spec);
    } catch (err) {
      throw portsFromFlags ? err : bad(`ports[${i}]`, (err as Error).message);
    }
  });
  const seen = new Set<number>();
  for (const p of ports) {
    if (seen.has(p.remote))
      throw bad(
        portsFromFlags ? undefined : "ports",
        `port ${p.remote} is listed twice; list each target port once`,
      );
    seen.add(p.remote);
  }
  const anyFilterFlag =
    flags.httpHeader?.length || flags.httpPath !== undefined || flags.httpMethod !== undefined;
  const filterInput = anyFilterFlag
    ? {
        ...(flags.httpHeader ? { headers: flags.httpHeader } : {}),
        ...(flags.httpPath !== undefined ? { path: flags.httpPath } : {}),
        ...(flags.httpMethod !== undefined ? { method: flags.httpMethod } : {}),
        ...(flags.httpMatch !== undefined ? { match: flags.httpMatch as "all" | "any" } : {}),
      }
    : (file.httpFilter ?? {});
  let httpFilter: HttpFilterSpec | undefined;
  try {
    httpFilter = filterFromFlags(filterInput, anyFilterFlag ? undefined : FILE_FILTER_NAMES);
  } catch (err) {
    throw bad(anyFilterFlag ? undefined : "httpFilter", (err as Error).message);
  }
  if (httpFilter && mode !== "steal")
    throw anyFilterFlag
      ? invalid(
          "HTTP filters (--http-header/--http-path/--http-method) need --steal: a mirror copies every request",
        )
      : bad(
          "httpFilter",
          `needs mode "steal" (a mirror copies every request): set "mode": "steal"${modeFromFile ? "" : " or pass --steal"}, or remove httpFilter`,
        );
  if (httpFilter && ports.length === 0)
    throw anyFilterFlag
      ? invalid("an HTTP filter needs the port to steal: add --port <target port>")
      : bad("httpFilter", 'needs the port to steal: add it to "ports" (or pass --port <target port>)');
  let ttlSeconds = file.ttlSeconds;
  if (flags.ttl !== undefined) {
    ttlSeconds = Number(flags.ttl);
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < TTL_SECONDS_MIN_CLI || ttlSeconds > TTL_SECONDS_MAX)
      throw invalid(
        `--ttl ${shown(flags.ttl)} must be a whole number of seconds between ${TTL_SECONDS_MIN_CLI} and ${TTL_SECONDS_MAX}`,
      );
  }
  const router = flags.router?.length
    ? flags.router
    : file.router === undefined
      ? []
      : Array.isArray(file.router)
        ? file.router
        : [file.router];
  const opt = <K extends string, V>(k: K, v: V | undefined) =>
    v === undefined ? {} : ({ [k]: v } as Record<K, V>);
  return {
    target,
    ...opt("namespace", flags.namespace ?? file.namespace),
    ...opt("context", flags.context ?? file.context),
    ...opt("kubeconfig", flags.kubeconfig ?? file.kubeconfig),
    router,
    ...opt("routerCa", flags.routerCa ?? file.routerCa),
    mode,
    ports,
    ...opt("httpFilter", httpFilter),
    envInclude: flags.envInclude?.length ? flags.envInclude : (file.env?.include ?? []),
    envExclude: flags.envExclude?.length ? flags.envExclude : (file.env?.exclude ?? []),
    ...opt("ttlSeconds", ttlSeconds),
    ...opt("failurePolicy", file.failurePolicy),
    proxy: flags.proxy ?? file.proxy ?? true,
    network: networkMode(flags.network ?? file.network?.mode),
    keepLocal: flags.keepLocal?.length ? flags.keepLocal : (file.network?.keepLocal ?? []),
    files: checkedPaths(flags.files?.length ? flags.files : (file.network?.files ?? [])),
    branches: resolveBranches(file.branches ?? [], target, bad),
    branchTimeoutSeconds: file.branchTimeoutSeconds ?? BRANCH_TIMEOUT_SECONDS_DEFAULT,
    queues: resolveQueues(file.queues ?? [], bad),
  };
}

/** How filter errors name the fields of switchyard.json's httpFilter. */
const FILE_FILTER_NAMES: HttpFilterNames = {
  header: (i) => `headers[${i}]`,
  path: "path",
  method: "method",
  match: "match",
};

function networkMode(v: string | undefined): SessionConfig["network"] {
  if (v === undefined) return "auto";
  if (v === "auto" || v === "transparent" || v === "proxy") return v;
  throw invalid(`--network must be auto, transparent or proxy, got ${JSON.stringify(v)}`);
}

function checkedPaths(paths: string[]): string[] {
  for (const p of paths)
    if (!p.startsWith("/"))
      throw invalid(`--files ${JSON.stringify(p)} must be the container's absolute path`);
  return paths;
}
