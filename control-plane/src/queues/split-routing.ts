// Which destination each message of a split queue goes to, and when two sessions' filters
// can claim the same message. The rule, the same in every cluster and every splitter:
// - sessions are ordered by admission (the session object's creation time, then its
//   namespace/name), the same order everywhere since it is read from the objects;
// - a message goes to the output queue of the FIRST steal session in that order whose filter
//   matches it, and to no other steal session's;
// - every mirror session whose filter matches gets a copy;
// - the deployed consumers get it unless a steal session took it.
// Overlap is told at admission: a session whose filter may match a message an earlier
// session's filter also matches is told so (both filters named). "May" is decided
// conservatively: two filters are disjoint only when some attribute or body path is tested
// by both and one side allows only literal values (`^(a|b)$`) none of which the other side's
// regex matches; otherwise they are reported as overlapping.
import type { QueueSplitMode } from "../../../proto/api/v1alpha1/index.js";
import type { FilterRegex } from "../../../proto/http-filter.js";
import type { CompiledFilter, ParsedMessage } from "./queue-filter.js";

export interface SplitSession {
  /** `<namespace>:<name>` of the session object in this cluster. */
  readonly key: string;
  /** When it was admitted (creationTimestamp, ms): earlier sessions win a contested message. */
  readonly admittedAt: number;
  readonly mode: QueueSplitMode;
  readonly filter: CompiledFilter;
  /** Where its messages go: the session's output queue. */
  readonly output: string;
}

export interface SplitDecision {
  /** Output queues that get the message (the steal winner and matching mirrors). */
  readonly outputs: readonly string[];
  /** The deployed consumers' queue gets it too (no steal session took it). */
  readonly toTarget: boolean;
}

/** Sessions in admission order (the order the rule above applies). */
export function admissionOrder<T extends Pick<SplitSession, "key" | "admittedAt">>(
  sessions: readonly T[],
): T[] {
  return [...sessions].sort(
    (a, b) => a.admittedAt - b.admittedAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0),
  );
}

/** Applies the rule to one message; `ordered` must be in admission order. */
export function decide(ordered: readonly SplitSession[], m: ParsedMessage): SplitDecision {
  const outputs: string[] = [];
  let stolen = false;
  for (const s of ordered) {
    if (s.mode === "steal" && stolen) continue;
    if (!s.filter.matches(m)) continue;
    if (!outputs.includes(s.output)) outputs.push(s.output);
    if (s.mode === "steal") stolen = true;
  }
  return { outputs, toTarget: !stolen };
}

/**
 * `^lit$`, `^(a|b)$` or `^(?:a|b)$` with literal characters only (escaped punctuation
 * allowed): the exact values a regex allows, or undefined when it is not that simple.
 */
export function literalSet(source: string): string[] | undefined {
  const m = /^\^(?:\((?:\?:)?(.*)\)|(.*))\$$/s.exec(source);
  if (!m) return undefined;
  const inner = m[1] ?? m[2] ?? "";
  const values: string[] = [];
  let current = "";
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i]!;
    if (c === "\\") {
      const next = inner[i + 1];
      if (next === undefined || /[A-Za-z0-9]/.test(next)) return undefined; // \d, \w, \b …
      current += next;
      i++;
    } else if (c === "|") {
      if (m[1] === undefined) return undefined; // ^a|b$ means (^a)|(b$)
      values.push(current);
      current = "";
    } else if ("^$.?*+()[]{}".includes(c)) return undefined;
    else current += c;
  }
  values.push(current);
  return values;
}

function disjoint(a: FilterRegex, b: FilterRegex): boolean {
  const la = literalSet(a.source);
  if (la && !la.some((v) => b.test(v))) return true;
  const lb = literalSet(b.source);
  return lb !== undefined && !lb.some((v) => a.test(v));
}

/** False only when no message can match both filters (see the module comment). */
export function filtersMayOverlap(a: CompiledFilter, b: CompiledFilter): boolean {
  for (const [name, ra] of a.attributes) {
    const rb = b.attributes.get(name);
    if (rb && disjoint(ra, rb)) return false;
  }
  for (const ca of a.body) {
    for (const cb of b.body) if (ca.path === cb.path && disjoint(ca.regex, cb.regex)) return false;
  }
  return true;
}

export interface Overlap {
  /** The earlier session's key and filter. */
  readonly earlier: string;
  readonly earlierFilter: string;
  readonly earlierMode: QueueSplitMode;
}

/** The earlier sessions (admission order) whose filter may claim a message `session`'s also matches. */
export function overlapsWithEarlier(
  session: Pick<SplitSession, "key" | "admittedAt" | "filter">,
  others: readonly Pick<SplitSession, "key" | "admittedAt" | "filter" | "mode">[],
): Overlap[] {
  const ordered = admissionOrder([...others, { ...session, mode: "steal" as const }]);
  const mine = ordered.findIndex((s) => s.key === session.key);
  return ordered
    .slice(0, mine)
    .filter((o) => filtersMayOverlap(session.filter, o.filter))
    .map((o) => ({ earlier: o.key, earlierFilter: o.filter.description, earlierMode: o.mode }));
}

/** The message of the QueueSplitOverlap condition: both filters and which one wins. */
export function overlapMessage(
  queueId: string,
  mine: { filter: string; mode: QueueSplitMode },
  overlaps: readonly Overlap[],
): string {
  return overlaps
    .map(
      (o) =>
        `queue ${queueId}: this session's filter (${mine.filter}) may match the same messages as session ` +
        `${o.earlier}'s (${o.earlierFilter}, ${o.earlierMode}), admitted earlier; ` +
        (mine.mode === "mirror"
          ? "a message both match still comes here as a copy"
          : o.earlierMode === "steal"
            ? "a message both match goes to the earlier session, not here"
            : "a message both match comes here, and the earlier session gets a copy"),
    )
    .join("; ");
}
