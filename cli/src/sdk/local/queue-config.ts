// SQS queue splits in `switchyard.json` (DESIGN §7): each entry names a queue the target
// consumes (by the id its QueueConsumer gives it) and the filter that picks the session's
// messages. They become the session's `connectParams.sqsSplit`. Each entry is checked here
// the way the API server and the splitters check it — the CRD's limits and patterns, body
// paths against `BODY_PATH_PATTERN`, every regex through `compileFilterRegex` (RE2, as the
// splitters run it), at least one filter, each queue once — so a mistake is named by its
// field in the file before anything is created.
import { Value } from "@sinclair/typebox/value";
import { z } from "zod";
import {
  BODY_PATH_PATTERN,
  ConnectParams,
  QUEUE_SPLIT_MODES,
  SqsQueueSplit,
  type SqsQueueSplit as SqsQueueSplitSpec,
} from "../../../../proto/api/v1alpha1/index.js";
import { compileFilterRegex } from "../../../../proto/http-filter.js";

/** As many splits as a session's connectParams can name. */
export const QUEUES_MAX: number = ConnectParams.properties.sqsSplit.maxItems ?? 16;
/** Most attributes one messageFilter tests, and body conditions one bodyFilter holds (the CRD's limits). */
export const MESSAGE_FILTER_MAX = 16;
export const BODY_FILTER_MAX = 8;
const ATTRIBUTE_NAME = /^[A-Za-z0-9_.-]{1,256}$/;
const BODY_PATH = new RegExp(BODY_PATH_PATTERN);

/** One entry of `queues` as written; limits are checked afterwards, naming the field. */
export const QueueConfigEntry = z.strictObject({
  /** The queue's id, as the target's QueueConsumer names it. */
  id: z.string(),
  /** Message attribute name → regular expression (RE2); all must match. */
  messageFilter: z.record(z.string(), z.string()).optional(),
  /** Conditions on the JSON body, all of which must hold. */
  bodyFilter: z.array(z.strictObject({ path: z.string(), matches: z.string() })).optional(),
  /** steal (default): matching messages go to the session only; mirror: it gets a copy. */
  mode: z.enum(QUEUE_SPLIT_MODES).optional(),
});
export type QueueConfigEntry = z.infer<typeof QueueConfigEntry>;

/** A value as messages quote it: JSON-quoted and cut. */
const shown = (v: string): string => JSON.stringify(v.length > 60 ? `${v.slice(0, 60)}…` : v);

/**
 * Validates the file's `queues`; returns the session's `sqsSplit`. Errors name the entry
 * and the field (`queues[0].messageFilter.tenant`) with the limit or the fix.
 */
export function resolveQueues(
  entries: readonly QueueConfigEntry[],
  bad: (field: string, message: string) => Error,
): SqsQueueSplitSpec[] {
  if (entries.length > QUEUES_MAX)
    throw bad("queues", `lists ${entries.length} queues; a session can split at most ${QUEUES_MAX}`);
  const seen = new Map<string, number>();
  return entries.map((e, i) => {
    const at = `queues[${i}]`;
    if (Value.Errors(SqsQueueSplit.properties.queueId, e.id).First())
      throw bad(
        `${at}.id`,
        `${shown(e.id)} must be a queue id as the target's QueueConsumer names it: 1-80 letters, digits, ` +
          "'-' or '_' (a FIFO queue's id ends in .fifo), e.g. orders",
      );
    const first = seen.get(e.id);
    if (first !== undefined)
      throw bad(
        at,
        `splits queue ${e.id} again (as queues[${first}]); a session splits each queue once: ` +
          "remove one entry, or widen the other's filter",
      );
    seen.set(e.id, i);
    if (e.messageFilter === undefined && e.bodyFilter === undefined)
      throw bad(
        at,
        "needs messageFilter, bodyFilter or both: a split without a filter would take every message " +
          'of the queue, e.g. "messageFilter": {"tenant": "^dev-alice$"}',
      );
    if (e.messageFilter) checkMessageFilter(e.messageFilter, `${at}.messageFilter`, bad);
    if (e.bodyFilter) checkBodyFilter(e.bodyFilter, `${at}.bodyFilter`, bad);
    const split: SqsQueueSplitSpec = {
      queueId: e.id,
      ...(e.messageFilter ? { messageFilter: e.messageFilter } : {}),
      ...(e.bodyFilter ? { bodyFilter: e.bodyFilter } : {}),
      ...(e.mode ? { mode: e.mode } : {}),
    };
    // The CRD's whole schema as a last net (every rule above is one of its parts).
    const err = Value.Errors(SqsQueueSplit, split).First();
    if (err)
      throw bad(`${at}${err.path.replace(/\//g, ".")}`, `${err.message} (what the session CRD accepts)`);
    return split;
  });
}

function checkRegex(source: string, field: string, bad: (field: string, message: string) => Error): void {
  if (source.length === 0)
    throw bad(field, 'is empty: write a regular expression, e.g. "^dev-" (or "." for any value)');
  try {
    compileFilterRegex(source);
  } catch (err) {
    throw bad(
      field,
      `${shown(source)} is not a valid regular expression: ${(err as Error).message}; fix the pattern`,
    );
  }
}

function checkMessageFilter(
  filter: Record<string, string>,
  at: string,
  bad: (field: string, message: string) => Error,
): void {
  const names = Object.keys(filter);
  if (names.length === 0)
    throw bad(at, "is empty: name at least one attribute → regular expression, or leave messageFilter out");
  if (names.length > MESSAGE_FILTER_MAX)
    throw bad(at, `tests ${names.length} attributes; at most ${MESSAGE_FILTER_MAX}`);
  for (const name of names) {
    if (!ATTRIBUTE_NAME.test(name))
      throw bad(at, `${shown(name)} is not a message attribute name: 1-256 letters, digits, '_', '-' or '.'`);
    checkRegex(filter[name]!, `${at}.${name}`, bad);
  }
}

function checkBodyFilter(
  conditions: ReadonlyArray<{ path: string; matches: string }>,
  at: string,
  bad: (field: string, message: string) => Error,
): void {
  if (conditions.length === 0)
    throw bad(at, "is empty: give at least one {path, matches} condition, or leave bodyFilter out");
  if (conditions.length > BODY_FILTER_MAX)
    throw bad(at, `has ${conditions.length} conditions; at most ${BODY_FILTER_MAX}`);
  conditions.forEach((c, j) => {
    if (c.path.length > 256 || !BODY_PATH.test(c.path))
      throw bad(
        `${at}[${j}].path`,
        `${shown(c.path)} is not a body path: write $ then .name, ['name'] or [index] steps ` +
          "(no .., no wildcards, no filters), e.g. $.order.tier or $['items'][0].sku",
      );
    checkRegex(c.matches, `${at}[${j}].matches`, bad);
  });
}
