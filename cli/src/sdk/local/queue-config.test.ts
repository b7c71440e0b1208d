// `queues` in switchyard.json: entries become the session's connectParams.sqsSplit as the
// session CRDs accept it, and every mistake — no filter, a regex RE2 refuses, a bad body
// path, an id twice, a bad id or mode — is refused before anything is created, naming the
// entry, the field and the fix.
import { Value } from "@sinclair/typebox/value";
import { describe, expect, it } from "vitest";
import { SqsQueueSplit } from "../../../../proto/api/v1alpha1/index.js";
import { CliErrorCode } from "../cli-errors.js";
import { parseConfigText, resolveConfig } from "./session-config.js";

const cfg = (extra: Record<string, unknown>) =>
  resolveConfig(
    parseConfigText(JSON.stringify({ target: "deployment/shop", ...extra }), "switchyard.json"),
    {},
  );
const queues = (...entries: unknown[]) => cfg({ queues: entries });

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect((err as { code?: string }).code).toBe(CliErrorCode.CONFIG_INVALID);
    return (err as Error).message;
  }
  throw new Error("expected the config to be refused");
}

describe("queues in switchyard.json", () => {
  it("has no splits by default", () => {
    expect(cfg({}).queues).toEqual([]);
  });

  it("turns each entry into a split the session CRDs accept, the mode only when given", () => {
    const c = queues(
      { id: "orders", messageFilter: { tenant: "^dev-alice$", "x.kind": "order|refund" } },
      {
        id: "refunds.fifo",
        bodyFilter: [
          { path: "$.order.tier", matches: "^gold$" },
          { path: "$['items'][0].sku", matches: "(?i)^sku-" },
        ],
        mode: "mirror",
      },
    );
    expect(c.queues).toEqual([
      { queueId: "orders", messageFilter: { tenant: "^dev-alice$", "x.kind": "order|refund" } },
      {
        queueId: "refunds.fifo",
        bodyFilter: [
          { path: "$.order.tier", matches: "^gold$" },
          { path: "$['items'][0].sku", matches: "(?i)^sku-" },
        ],
        mode: "mirror",
      },
    ]);
    for (const q of c.queues) expect(Value.Check(SqsQueueSplit, q)).toBe(true);
  });

  it.each<[string, unknown[], string[]]>([
    [
      "an entry without a filter",
      [{ id: "orders" }],
      ["switchyard.json: queues[0]: needs messageFilter, bodyFilter or both", "would take every message"],
    ],
    [
      "a lookahead in messageFilter",
      [{ id: "orders", messageFilter: { tenant: "(?=x)" } }],
      ['switchyard.json: queues[0].messageFilter.tenant: "(?=x)" is not a valid regular expression', "RE2"],
    ],
    [
      "a backreference in bodyFilter.matches",
      [{ id: "orders", bodyFilter: [{ path: "$.a", matches: "(a)\\1" }] }],
      ["switchyard.json: queues[0].bodyFilter[0].matches:", "RE2 syntax: no backreferences or lookaround"],
    ],
    [
      "a regex over the size limit",
      [{ id: "orders", messageFilter: { tenant: "a{1,500}b{1,500}" } }],
      ["queues[0].messageFilter.tenant:", "instructions"],
    ],
    [
      "an empty regex",
      [{ id: "orders", messageFilter: { tenant: "" } }],
      ["queues[0].messageFilter.tenant: is empty"],
    ],
    [
      "a body path without $",
      [{ id: "orders", bodyFilter: [{ path: "a.b", matches: "x" }] }],
      ['queues[0].bodyFilter[0].path: "a.b" is not a body path', "e.g. $.order.tier"],
    ],
    [
      "a recursive-descent body path",
      [{ id: "orders", bodyFilter: [{ path: "$..x", matches: "x" }] }],
      ['queues[0].bodyFilter[0].path: "$..x" is not a body path'],
    ],
    [
      "a body path with an unquoted bracket",
      [{ id: "orders", messageFilter: { a: "b" }, bodyFilter: [{ path: "$[x]", matches: "x" }] }],
      ['queues[0].bodyFilter[0].path: "$[x]" is not a body path'],
    ],
    [
      "the same queue twice",
      [
        { id: "orders", messageFilter: { a: "1" } },
        { id: "orders", messageFilter: { a: "2" } },
      ],
      ["queues[1]: splits queue orders again (as queues[0])", "remove one entry"],
    ],
    [
      "a queue id with a slash",
      [{ id: "shop/orders", messageFilter: { a: "1" } }],
      ['queues[0].id: "shop/orders" must be a queue id', "e.g. orders"],
    ],
    ["an empty messageFilter", [{ id: "orders", messageFilter: {} }], ["queues[0].messageFilter: is empty"]],
    ["an empty bodyFilter", [{ id: "orders", bodyFilter: [] }], ["queues[0].bodyFilter: is empty"]],
    [
      "an attribute name with a space",
      [{ id: "orders", messageFilter: { "my attr": "x" } }],
      ['queues[0].messageFilter: "my attr" is not a message attribute name'],
    ],
    [
      "more queues than a session splits",
      Array.from({ length: 17 }, (_, i) => ({ id: `q${i}`, messageFilter: { a: "1" } })),
      ["queues: lists 17 queues; a session can split at most 16"],
    ],
  ])("refuses %s, naming the field", (_what, entries, parts) => {
    const message = refusal(() => queues(...entries));
    for (const p of parts) expect(message).toContain(p);
  });

  it("refuses an unknown mode and an unknown field through the file's schema", () => {
    expect(refusal(() => queues({ id: "orders", messageFilter: { a: "1" }, mode: "copy" }))).toMatch(
      /queues\.0\.mode/,
    );
    expect(refusal(() => queues({ id: "orders", messageFilter: { a: "1" }, queue: "x" }))).toMatch(
      /queues\.0.*queue/,
    );
  });
});
