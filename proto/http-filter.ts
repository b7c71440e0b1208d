// What a valid HTTP filter of a filtered steal is (the `HttpFilter` message of
// session.proto): a header condition names an HTTP header (an RFC 9110 token, matched
// case-insensitively), a method is letters only (matched upper-cased), regular
// expressions are RE2 syntax without flags (case-sensitive unless the pattern says `(?i)`).
// Agents match every request on a stolen port — the app's own traffic included — against
// these regexes, so they run on RE2 (re2js: linear in the input, no backtracking) rather
// than JavaScript's RegExp, where one pattern like `(a+)+$` could stall the target pod.
// Agents compile them with `compileFilterRegex` and refuse the subscription otherwise, and
// the CLI checks flags with the same function so a bad filter is refused before it is sent.
// Agents also refuse filters nesting deeper, and regexes longer or larger once compiled,
// than the limits below.
import { RE2JS, RE2JSException } from "re2js";

/** Deepest nesting of all-of / any-of an agent accepts. */
export const HTTP_FILTER_MAX_DEPTH = 8;
/** Longest regular expression an agent accepts, characters. */
export const HTTP_FILTER_MAX_REGEX_LENGTH = 1024;
/**
 * Largest compiled regular expression an agent accepts, RE2 instructions (about one per
 * literal character; a counted repeat `x{1,500}` compiles its body 500 times). Matching
 * stays linear in the input, but its factor grows with the program: at this bound a match
 * on a whole 16 KiB request head (Node's limit) takes under half a second at worst.
 * Ordinary filters compile to tens of instructions.
 */
export const HTTP_FILTER_MAX_PROGRAM_SIZE = 1000;

/** What to write instead, appended to every refusal of a filter regex. */
export const HTTP_FILTER_REGEX_SYNTAX = "RE2 syntax: no backreferences or lookaround";

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** True for a header name a filter may test. */
export const isHttpHeaderName = (name: string): boolean => TOKEN.test(name);

/** True for a method a filter may test (letters only; compared upper-cased). */
export const isHttpMethod = (method: string): boolean => /^[A-Za-z]+$/.test(method);

/** A filter's compiled regular expression. */
export interface FilterRegex {
  readonly source: string;
  /** True when the regex matches anywhere in `input` (unanchored, as `RegExp#test`). */
  test(input: string): boolean;
}

/**
 * Compiles a filter's regular expression the way every agent evaluates it (RE2, no
 * flags); throws a SyntaxError saying what is wrong and naming RE2 syntax when it does
 * not compile or exceeds the limits above.
 */
export function compileFilterRegex(source: string): FilterRegex {
  const refuse = (why: string) => new SyntaxError(`${why} (${HTTP_FILTER_REGEX_SYNTAX})`);
  if (source.length > HTTP_FILTER_MAX_REGEX_LENGTH)
    throw refuse(`${source.length} characters, longer than the ${HTTP_FILTER_MAX_REGEX_LENGTH} allowed`);
  let re: RE2JS;
  try {
    re = RE2JS.compile(source);
  } catch (err) {
    if (err instanceof RE2JSException) throw refuse(err.message);
    throw err;
  }
  const size = re.programSize();
  if (size > HTTP_FILTER_MAX_PROGRAM_SIZE)
    throw refuse(
      `compiles to ${size} instructions, more than the ${HTTP_FILTER_MAX_PROGRAM_SIZE} allowed: ` +
        `write large counted repeats such as {1,500} as + or *`,
    );
  return { source, test: (input) => re.test(input) };
}
