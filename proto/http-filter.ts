// What a valid HTTP filter of a filtered steal is (the `HttpFilter` message of
// session.proto): a header condition names an HTTP header (an RFC 9110 token, matched
// case-insensitively), a method is letters only (matched upper-cased), regular
// expressions are JavaScript syntax without flags — agents compile them with
// `compileFilterRegex` and refuse the subscription otherwise, and the CLI checks flags
// with the same rules so a bad filter is refused before it is sent. Agents also refuse
// filters nesting deeper or regexes longer than the limits below.

/** Deepest nesting of all-of / any-of an agent accepts. */
export const HTTP_FILTER_MAX_DEPTH = 8;
/** Longest regular expression an agent accepts, characters. */
export const HTTP_FILTER_MAX_REGEX_LENGTH = 1024;

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** True for a header name a filter may test. */
export const isHttpHeaderName = (name: string): boolean => TOKEN.test(name);

/** True for a method a filter may test (letters only; compared upper-cased). */
export const isHttpMethod = (method: string): boolean => /^[A-Za-z]+$/.test(method);

/**
 * Compiles a filter's regular expression the way every agent evaluates it; throws the
 * engine's SyntaxError when it does not compile.
 */
export function compileFilterRegex(source: string): RegExp {
  return new RegExp(source);
}
