import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { testScratchDir } from "../../../../test/support/scratch-dir.js";
import { PortSubscriptions } from "./port-subscriptions.js";
import { parseJournal, SubscriptionJournal } from "./subscription-journal.js";

function capture() {
  const lines: string[] = [];
  const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(l) });
  return { logger, lines };
}

describe("SubscriptionJournal", () => {
  it("saves every change and restores the subscriptions in their order, filters included", () => {
    const path = join(testScratchDir("journal-"), "subscriptions.json");
    const subs = new PortSubscriptions();
    const { logger } = capture();
    const journal = new SubscriptionJournal({ path, subscriptions: subs, logger });
    journal.attach();
    subs.subscribe("a", 80, "steal", { header: { name: "x-dev", valueRegex: "^alice$" } });
    subs.subscribe("b", 80, "steal", { header: { name: "x-dev", valueRegex: "^bob$" } });
    subs.subscribe("c", 81, "mirror");
    subs.unsubscribe("c", 81);
    subs.subscribe("c", 82, "mirror");
    journal.stop();
    subs.dropSession("a"); // after stop: not saved (a shutdown keeps what was live)
    const next = new PortSubscriptions();
    const sessions = new SubscriptionJournal({ path, subscriptions: next, logger }).restore();
    expect(sessions.sort()).toEqual(["a", "b", "c"]);
    expect(next.all().map((s) => [s.sessionId, s.port, s.mode, s.filter])).toEqual([
      ["a", 80, "steal", { header: { name: "x-dev", valueRegex: "^alice$" } }],
      ["b", 80, "steal", { header: { name: "x-dev", valueRegex: "^bob$" } }],
      ["c", 82, "mirror", undefined],
    ]);
    // Oldest still wins after a restore: a request both filters match goes to a.
    expect(next.forPort(80)[0]!.sessionId).toBe("a");
  });

  it("starts empty, with a warning naming the file, from a missing, corrupt or hostile journal", () => {
    const dir = testScratchDir("journal-");
    const path = join(dir, "subscriptions.json");
    const { logger, lines } = capture();
    expect(
      new SubscriptionJournal({ path, subscriptions: new PortSubscriptions(), logger }).restore(),
    ).toEqual([]);
    expect(lines).toEqual([]);
    for (const text of [
      "{not json",
      '{"version":2,"subscriptions":[]}',
      '{"version":1,"subscriptions":[{"port":1}]}',
    ]) {
      writeFileSync(path, text);
      const subs = new PortSubscriptions();
      expect(new SubscriptionJournal({ path, subscriptions: subs, logger }).restore()).toEqual([]);
      expect(subs.all()).toEqual([]);
    }
    expect(lines).toHaveLength(3);
    expect(lines.every((l) => l.includes(path) && l.includes("not valid"))).toBe(true);
    // Entries the agent refuses (a bad port, a conflicting steal) are left out, the rest kept.
    writeFileSync(
      path,
      JSON.stringify({
        version: 1,
        subscriptions: [
          { sessionId: "a", port: 70000, mode: "steal" },
          { sessionId: "b", port: 80, mode: "steal" },
          { sessionId: "c", port: 80, mode: "steal" },
        ],
      }),
    );
    const subs = new PortSubscriptions();
    expect(new SubscriptionJournal({ path, subscriptions: subs, logger }).restore()).toEqual(["b"]);
    expect(lines.filter((l) => l.includes("could not be restored"))).toHaveLength(2);
  });

  it("names the entry that is wrong", () => {
    expect(() =>
      parseJournal('{"version":1,"subscriptions":[{"sessionId":"a","port":80,"mode":"take"}]}'),
    ).toThrow(/subscriptions\[0\] needs sessionId, port, mode \(mirror\|steal\)/);
  });

  it("keeps serving when the file cannot be written, and says so", () => {
    // A regular file where the directory should be: unwritable for any user, root included.
    const blocker = join(testScratchDir("journal-"), "not-a-dir");
    writeFileSync(blocker, "");
    const { logger, lines } = capture();
    const subs = new PortSubscriptions();
    const journal = new SubscriptionJournal({ path: join(blocker, "s.json"), subscriptions: subs, logger });
    journal.attach();
    subs.subscribe("a", 80, "mirror");
    expect(subs.all()).toHaveLength(1);
    expect(lines.filter((l) => l.includes("cannot save the subscriptions"))).toHaveLength(2);
    expect(readFileSync(blocker, "utf8")).toBe("");
  });
});
