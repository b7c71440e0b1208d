// What a session's split filter is, compiled: every attribute regex of `messageFilter`
// must match the attribute's value (an absent attribute does not match), and every
// `bodyFilter` condition must match the value its path reaches in the JSON body. Regexes
// run on RE2 (`compileFilterRegex`, the same limits as HTTP filters): the splitter tests
// every message of a shared queue against them, and one backtracking pattern must not
// stall it. Body paths are the small subset the CRD allows (`$`, `.name`, `['name']`,
// `[index]`), evaluated here without a JSONPath engine: no filter expressions, no scripts.
import type { BodyCondition, SqsQueueSplit } from "../../../proto/api/v1alpha1/index.js";
import { compileFilterRegex, type FilterRegex } from "../../../proto/http-filter.js";

/** A message as filters see it: attribute values as strings, the body as sent. */
export interface FilterableMessage {
  readonly attributes: Readonly<Record<string, string>>;
  readonly body: string;
}

/** A message with its body parsed at most once, however many filters read it. */
export class ParsedMessage implements FilterableMessage {
  #json: { ok: true; value: unknown } | { ok: false } | undefined;
  constructor(
    readonly attributes: Readonly<Record<string, string>>,
    readonly body: string,
  ) {}
  json(): { ok: true; value: unknown } | { ok: false } {
    if (!this.#json) {
      try {
        this.#json = { ok: true, value: JSON.parse(this.body) as unknown };
      } catch {
        this.#json = { ok: false };
      }
    }
    return this.#json;
  }
}

export type BodyPathStep = string | number;

/** Parses `$.a['b'][0]` into its steps; throws naming the position when it is not one. */
export function parseBodyPath(path: string): BodyPathStep[] {
  if (!path.startsWith("$")) throw new SyntaxError(`a body path starts with $, got "${path}"`);
  const steps: BodyPathStep[] = [];
  const step = /\.([A-Za-z_][A-Za-z0-9_-]*)|\['([^'\\]+)'\]|\[([0-9]+)\]/y;
  let at = 1;
  while (at < path.length) {
    step.lastIndex = at;
    const m = step.exec(path);
    if (!m)
      throw new SyntaxError(
        `"${path}" is not a body path at character ${at + 1}: use .name, ['name'] or [index] steps after $`,
      );
    steps.push(m[1] ?? m[2] ?? Number(m[3]));
    at = step.lastIndex;
  }
  return steps;
}

/** The value a path reaches as a filter sees it, or undefined (absent, or an object/array). */
export function valueAt(json: unknown, steps: readonly BodyPathStep[]): string | undefined {
  let v: unknown = json;
  for (const s of steps) {
    if (typeof s === "number") {
      if (!Array.isArray(v) || s >= v.length) return undefined;
      v = v[s];
    } else {
      if (v === null || typeof v !== "object" || Array.isArray(v) || !Object.hasOwn(v, s)) return undefined;
      v = (v as Record<string, unknown>)[s];
    }
  }
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean" || v === null) return JSON.stringify(v);
  return undefined;
}

/** One compiled filter: what it tests, for messages and for the overlap check. */
export interface CompiledFilter {
  readonly attributes: ReadonlyMap<string, FilterRegex>;
  readonly body: readonly { path: string; steps: BodyPathStep[]; regex: FilterRegex }[];
  matches(m: ParsedMessage): boolean;
  /** `tenant=~^dev$, $.tier=~^gold$`: how errors and the overlap warning name it. */
  readonly description: string;
}

/**
 * Compiles a split's filter; throws a SyntaxError naming the field (`messageFilter.<attr>`,
 * `bodyFilter[i].path|matches`) when a regex or path is not valid. The API server checked
 * the same already; a control plane does not trust that it ran.
 */
export function compileSplitFilter(
  split: Pick<SqsQueueSplit, "messageFilter" | "bodyFilter">,
): CompiledFilter {
  const attributes = new Map<string, FilterRegex>();
  for (const [name, source] of Object.entries(split.messageFilter ?? {})) {
    try {
      attributes.set(name, compileFilterRegex(source));
    } catch (err) {
      throw new SyntaxError(`messageFilter.${name}: ${(err as Error).message}`, { cause: err });
    }
  }
  const body = (split.bodyFilter ?? []).map((c: BodyCondition, i) => {
    let steps: BodyPathStep[];
    let regex: FilterRegex;
    try {
      steps = parseBodyPath(c.path);
    } catch (err) {
      throw new SyntaxError(`bodyFilter[${i}].path: ${(err as Error).message}`, { cause: err });
    }
    try {
      regex = compileFilterRegex(c.matches);
    } catch (err) {
      throw new SyntaxError(`bodyFilter[${i}].matches: ${(err as Error).message}`, { cause: err });
    }
    return { path: c.path, steps, regex };
  });
  if (attributes.size === 0 && body.length === 0)
    throw new SyntaxError(
      "name messageFilter, bodyFilter or both: a split without a filter takes every message",
    );
  const description = [
    ...[...attributes].map(([k, r]) => `${k}=~${r.source}`),
    ...body.map((b) => `${b.path}=~${b.regex.source}`),
  ].join(", ");
  return {
    attributes,
    body,
    description,
    matches(m) {
      for (const [name, regex] of attributes) {
        const v = m.attributes[name];
        if (v === undefined || !regex.test(v)) return false;
      }
      if (body.length === 0) return true;
      const parsed = m.json();
      if (!parsed.ok) return false;
      return body.every((b) => {
        const v = valueAt(parsed.value, b.steps);
        return v !== undefined && b.regex.test(v);
      });
    },
  };
}
