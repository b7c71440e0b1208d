// One entry of the operator's target allow-list, `<namespace>/<kind>/<name>` with `*`
// standing for any run of characters within one part (the syntax is the CRD's,
// ALLOWED_TARGET_PATTERN in proto/api/v1alpha1). Parts are matched one by one, in linear
// time per part, so a pattern full of stars costs no more than a plain one.
import { OptionError } from "../../../lib/option-error.js";
import { ALLOWED_TARGET_PATTERN } from "../../../proto/api/v1alpha1/index.js";

const SYNTAX = new RegExp(ALLOWED_TARGET_PATTERN);

export interface TargetPattern {
  /** As written, e.g. `shop/deployment/api-*`. */
  readonly source: string;
  matches(namespace: string, kind: string, name: string): boolean;
}

/** Parses one pattern; `option` names the flag or field in the error. */
export function parseTargetPattern(source: string, option: string): TargetPattern {
  if (!SYNTAX.test(source))
    throw new OptionError(
      option,
      `"${source}" is not a target pattern: write <namespace>/<kind>/<name> with kind deployment, ` +
        `statefulset, pod or *, and * for any run of characters in a part (e.g. shop/deployment/api-*)`,
    );
  const [ns, kind, name] = source.split("/") as [string, string, string];
  return {
    source,
    matches: (namespace, k, n) => glob(ns, namespace) && glob(kind, k) && glob(name, n),
  };
}

/** `*` matches any run of characters; everything else itself. Greedy with one backtrack point. */
function glob(pattern: string, text: string): boolean {
  let p = 0;
  let t = 0;
  let star = -1;
  let resume = 0;
  while (t < text.length) {
    if (p < pattern.length && pattern[p] !== "*" && pattern[p] === text[t]) {
      p++;
      t++;
    } else if (p < pattern.length && pattern[p] === "*") {
      star = p++;
      resume = t;
    } else if (star >= 0) {
      p = star + 1;
      t = ++resume;
    } else return false;
  }
  while (pattern[p] === "*") p++;
  return p === pattern.length;
}
