// HTTP filters of filtered steals: which requests a session takes while the rest still
// reach the app. A filter is a small tree — header (name exact, case-insensitive; value
// regex), path regex, method, all-of, any-of — compiled once when the subscription is
// made, so a bad regex is refused at subscribe time, not at the first request. Regexes are
// RE2 (proto/http-filter.ts): every request on the port, the app's own included, is
// matched, and RE2 matches in time linear in the request, whatever the pattern.
import { ErrorCode } from "../../../../proto/error-codes.js";
import {
  compileFilterRegex,
  HTTP_FILTER_MAX_DEPTH as MAX_DEPTH,
  isHttpHeaderName,
  isHttpMethod,
  type FilterRegex,
} from "../../../../proto/http-filter.js";

export type HttpFilter =
  | { header: { name: string; valueRegex: string } }
  | { pathRegex: string }
  | { method: string }
  | { allOf: HttpFilter[] }
  | { anyOf: HttpFilter[] };

export interface RequestHead {
  method: string;
  /** Request target as sent, e.g. /api/items?x=1 */
  path: string;
  /** Header pairs as received (names in any case; repeated headers repeat). */
  headers: ReadonlyArray<readonly [string, string]>;
}

export type CompiledFilter = (req: RequestHead) => boolean;

export class HttpFilterError extends Error {
  readonly code = ErrorCode.HTTP_FILTER_INVALID;
}

function regex(source: string, what: string): FilterRegex {
  try {
    return compileFilterRegex(source);
  } catch (err) {
    throw new HttpFilterError(
      `${what}: invalid regular expression ${JSON.stringify(source)}: ${(err as Error).message}`,
    );
  }
}

export function compileHttpFilter(filter: HttpFilter, depth = 0, at = "http_filter"): CompiledFilter {
  if (depth > MAX_DEPTH) throw new HttpFilterError(`${at}: filters nest deeper than ${MAX_DEPTH} levels`);
  if ("header" in filter) {
    const name = filter.header.name.toLowerCase();
    if (!isHttpHeaderName(name)) {
      throw new HttpFilterError(
        `${at}.header.name: ${JSON.stringify(filter.header.name)} is not an HTTP header name`,
      );
    }
    const re = regex(filter.header.valueRegex, `${at}.header.value_regex`);
    return (req) => req.headers.some(([n, v]) => n.toLowerCase() === name && re.test(v));
  }
  if ("pathRegex" in filter) {
    const re = regex(filter.pathRegex, `${at}.path_regex`);
    return (req) => re.test(req.path);
  }
  if ("method" in filter) {
    const m = filter.method.toUpperCase();
    if (!isHttpMethod(m))
      throw new HttpFilterError(`${at}.method: ${JSON.stringify(filter.method)} is not an HTTP method`);
    return (req) => req.method.toUpperCase() === m;
  }
  const list = "allOf" in filter ? filter.allOf : filter.anyOf;
  const kind = "allOf" in filter ? "all_of" : "any_of";
  if (list.length === 0) throw new HttpFilterError(`${at}.${kind}: give at least one filter`);
  const parts = list.map((f, i) => compileHttpFilter(f, depth + 1, `${at}.${kind}[${i}]`));
  return "allOf" in filter ? (req) => parts.every((p) => p(req)) : (req) => parts.some((p) => p(req));
}
