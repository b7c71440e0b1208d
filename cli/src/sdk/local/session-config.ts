// The session configuration a developer writes once (`switchyard.json`) and overrides with
// flags. `{"target": "deployment/myapp"}` is a complete file: everything else has a
// default, and nothing in it names clusters (the operator's configuration decides).
// Flags win over the file; the result is validated once with errors naming the field.
import { readFileSync } from "node:fs";
import { z } from "zod";
import { parseTarget } from "../../../../proto/api/v1alpha1/index.js";
import { CliError, CliErrorCode } from "../cli-errors.js";
import { filterFromFlags, type HttpFilterSpec } from "../session/http-filter.js";

const PortSpec = z.union([z.number().int(), z.string()]);

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
  ttlSeconds: z.number().int().min(10).max(86_400).optional(),
  failurePolicy: z.enum(["AllOrNothing", "BestEffort"]).optional(),
  /** Give the process a SOCKS5/HTTP proxy through the Default cluster (default true). */
  proxy: z.boolean().optional(),
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
}

function invalid(message: string): CliError {
  return new CliError(CliErrorCode.CONFIG_INVALID, message);
}

/** Parses `8080` or `8080:3000` (target port : local port). */
export function parsePortMapping(spec: string | number): PortMapping {
  const m = /^(\d{1,5})(?::(\d{1,5}))?$/.exec(String(spec).trim());
  const remote = m ? Number(m[1]) : NaN;
  const local = m?.[2] ? Number(m[2]) : remote;
  if (!m || remote < 1 || remote > 65535 || local < 1 || local > 65535)
    throw invalid(`port "${spec}" must be PORT or PORT:LOCALPORT with ports 1-65535, e.g. 8080 or 8080:3000`);
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
    throw invalid(`${source} is not valid JSON: ${(err as Error).message}`);
  }
  const r = SessionConfigFile.safeParse(json);
  if (!r.success) {
    const issues = r.error.issues
      .map((i) => `${i.path.length ? i.path.join(".") : "(root)"}: ${i.message}`)
      .join("; ");
    throw invalid(`${source} is not a valid switchyard config: ${issues}`);
  }
  return r.data;
}

/** Flags over file over defaults, validated. */
export function resolveConfig(file: SessionConfigFile, flags: SessionFlags): SessionConfig {
  const target = flags.target ?? file.target;
  if (!target)
    throw invalid(
      'no target: pass -t deployment/<name> or put {"target": "deployment/<name>"} in switchyard.json (-f)',
    );
  try {
    parseTarget(target);
  } catch (err) {
    throw invalid((err as Error).message);
  }
  if (flags.steal && flags.mirror) throw invalid("--steal and --mirror exclude each other; pick one");
  const mode = flags.steal ? "steal" : flags.mirror ? "mirror" : (file.mode ?? "mirror");
  const ports = (flags.port?.length ? flags.port : (file.ports ?? [])).map(parsePortMapping);
  const seen = new Set<number>();
  for (const p of ports) {
    if (seen.has(p.remote)) throw invalid(`port ${p.remote} is listed twice`);
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
    httpFilter = filterFromFlags(filterInput);
  } catch (err) {
    throw invalid((err as Error).message);
  }
  if (httpFilter && mode !== "steal")
    throw invalid(
      "HTTP filters (--http-header/--http-path/--http-method) need --steal: a mirror copies every request",
    );
  if (httpFilter && ports.length === 0)
    throw invalid("an HTTP filter needs the port to steal: add --port <target port>");
  let ttlSeconds = file.ttlSeconds;
  if (flags.ttl !== undefined) {
    ttlSeconds = Number(flags.ttl);
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < 10 || ttlSeconds > 86_400)
      throw invalid(`--ttl "${flags.ttl}" must be a whole number of seconds between 10 and 86400`);
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
  };
}
