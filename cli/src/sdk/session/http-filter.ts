// HTTP filters for filtered steals: the user-facing form (flags / config file) and its
// protobuf shape. `--http-header 'X-User: alice'` matches when the header's whole value
// matches the regular expression after the colon; `--http-path` is a regular expression
// on the request path (add ^/$ yourself); `--http-method` matches the method exactly.
// Several conditions combine with all-of (default) or any-of. Regexes are RE2 syntax (no
// backreferences or lookaround; agents match them in linear time). Header names, methods
// and regexes are checked by the rules agents apply (proto/http-filter.ts), so a bad
// filter is refused here rather than by every cluster.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HttpFilterSchema } from "../../../../proto/gen/session_pb.js";
import { compileFilterRegex, isHttpHeaderName, isHttpMethod } from "../../../../proto/http-filter.js";
import { CliError, CliErrorCode } from "../cli-errors.js";

export type HttpFilterSpec =
  | { header: { name: string; valueRegex: string } }
  | { path: string }
  | { method: string }
  | { allOf: HttpFilterSpec[] }
  | { anyOf: HttpFilterSpec[] };

export interface HttpFilterFlags {
  headers?: string[];
  path?: string;
  method?: string;
  /** How the conditions combine (default "all"). */
  match?: "all" | "any";
}

/** What errors call each part of a filter: the flags by default, or the fields of a config file. */
export interface HttpFilterNames {
  header: (index: number) => string;
  path: string;
  method: string;
  match: string;
}

const FLAG_NAMES: HttpFilterNames = {
  header: () => "--http-header",
  path: "--http-path",
  method: "--http-method",
  match: "--http-match",
};

/** Checks `source` (what is sent) as agents will; errors show `shown` (what was typed). */
function checkRegex(what: string, shown: string, source = shown): void {
  try {
    compileFilterRegex(source);
  } catch (err) {
    throw new CliError(
      CliErrorCode.INVALID_OPTION,
      `${what} ${quote(shown)} is not a valid regular expression: ${(err as Error).message}`,
    );
  }
}

/** A typed value as errors show it: one line (JSON escapes), cut when long. */
function quote(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
}

/** Parses one `Name: value-regex` header condition. */
export function parseHeaderFlag(flag: string, what = "--http-header"): { name: string; valueRegex: string } {
  const i = flag.indexOf(":");
  const name = i < 0 ? "" : flag.slice(0, i).trim();
  const value = i < 0 ? "" : flag.slice(i + 1).trim();
  if (!name || !isHttpHeaderName(name) || !value)
    throw new CliError(
      CliErrorCode.INVALID_OPTION,
      `${what} ${quote(flag)} must look like "Name: value" (the value is a regular expression matched against the whole header value)`,
    );
  // Alone first, so `a)|(b` cannot escape the anchors; anchored, as sent, for the limits.
  const valueRegex = `^(?:${value})$`;
  checkRegex(`${what} value`, value);
  checkRegex(`${what} value`, value, valueRegex);
  return { name, valueRegex };
}

/** The filter the flags describe, or undefined when none was given (steal everything). */
export function filterFromFlags(
  flags: HttpFilterFlags,
  names: HttpFilterNames = FLAG_NAMES,
): HttpFilterSpec | undefined {
  const parts: HttpFilterSpec[] = [];
  (flags.headers ?? []).forEach((h, i) => parts.push({ header: parseHeaderFlag(h, names.header(i)) }));
  if (flags.path !== undefined) {
    if (!flags.path) throw new CliError(CliErrorCode.INVALID_OPTION, `${names.path} must not be empty`);
    checkRegex(names.path, flags.path);
    parts.push({ path: flags.path });
  }
  if (flags.method !== undefined) {
    if (!isHttpMethod(flags.method))
      throw new CliError(
        CliErrorCode.INVALID_OPTION,
        `${names.method} ${quote(flags.method)} must be an HTTP method such as GET`,
      );
    parts.push({ method: flags.method.toUpperCase() });
  }
  if (flags.match !== undefined && flags.match !== "all" && flags.match !== "any")
    throw new CliError(
      CliErrorCode.INVALID_OPTION,
      `${names.match} must be "all" or "any", got ${quote(String(flags.match))}`,
    );
  if (parts.length === 0) return undefined;
  if (parts.length === 1) return parts[0];
  return flags.match === "any" ? { anyOf: parts } : { allOf: parts };
}

/** The protobuf HttpFilter of a spec. */
export function toProtoFilter(spec: HttpFilterSpec): MessageInitShape<typeof HttpFilterSchema> {
  if ("header" in spec) return { filter: { case: "header", value: spec.header } };
  if ("path" in spec) return { filter: { case: "pathRegex", value: spec.path } };
  if ("method" in spec) return { filter: { case: "method", value: spec.method } };
  if ("allOf" in spec)
    return { filter: { case: "allOf", value: { filters: spec.allOf.map(toProtoFilter) } } };
  return { filter: { case: "anyOf", value: { filters: spec.anyOf.map(toProtoFilter) } } };
}

/** A short human description, e.g. `header X-User ~ ^(?:alice)$ and path ~ ^/api`. */
export function describeFilter(spec: HttpFilterSpec): string {
  if ("header" in spec) return `header ${spec.header.name} ~ ${spec.header.valueRegex}`;
  if ("path" in spec) return `path ~ ${spec.path}`;
  if ("method" in spec) return `method ${spec.method}`;
  if ("allOf" in spec) return spec.allOf.map(describeFilter).join(" and ");
  return spec.anyOf.map(describeFilter).join(" or ");
}
