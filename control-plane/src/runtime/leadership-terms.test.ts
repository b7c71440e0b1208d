import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { untilAborted } from "../../../lib/abortable-sleep.js";
import { LeadershipTerms } from "./leadership-terms.js";

const silent = pino({ level: "silent" });

/** A term work that records when each of its terms starts and ends, and drains for `drainMs`. */
function recorder(log: string[], name: string, drainMs = 0) {
  let n = 0;
  return async (leading: AbortSignal) => {
    const term = ++n;
    log.push(`${name} ${term} start`);
    await untilAborted(leading);
    await new Promise((r) => setTimeout(r, drainMs));
    log.push(`${name} ${term} end`);
  };
}

describe("LeadershipTerms", () => {
  it("calls every work each term, and a work's next term only once its previous one drained", async () => {
    const log: string[] = [];
    const terms = new LeadershipTerms(silent);
    terms.add("slow", recorder(log, "slow", 50));
    terms.add("quick", recorder(log, "quick"));
    const first = new AbortController();
    terms.startTerm(first.signal);
    await new Promise((r) => setTimeout(r, 5));
    first.abort();
    const second = new AbortController();
    terms.startTerm(second.signal);
    await new Promise((r) => setTimeout(r, 10));
    // The quick work is in its second term; the slow one still drains its first.
    expect(log).toEqual(["slow 1 start", "quick 1 start", "quick 1 end", "quick 2 start"]);
    await new Promise((r) => setTimeout(r, 80));
    expect(log.slice(4)).toEqual(["slow 1 end", "slow 2 start"]);
    second.abort();
    await Promise.all([terms.ended("slow"), terms.ended("quick")]);
    expect(log.slice(6).sort()).toEqual(["quick 2 end", "slow 2 end"]);
    expect(terms.terms).toBe(2);
  });

  it("skips a term that ended before the work's previous one drained", async () => {
    const log: string[] = [];
    const terms = new LeadershipTerms(silent);
    terms.add("slow", recorder(log, "slow", 30));
    const first = new AbortController();
    terms.startTerm(first.signal);
    await new Promise((r) => setTimeout(r, 5));
    first.abort();
    const short = new AbortController();
    terms.startTerm(short.signal);
    short.abort();
    await terms.ended("slow");
    expect(log).toEqual(["slow 1 start", "slow 1 end"]);
  });

  it("logs a failed term and calls the work again next term", async () => {
    const lines: Array<{ work?: string; err?: string; msg?: string }> = [];
    const logger = pino({ level: "error" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const terms = new LeadershipTerms(logger);
    let calls = 0;
    terms.add("flaky", async () => {
      calls++;
      if (calls === 1) throw new Error("no informer");
    });
    terms.startTerm(new AbortController().signal);
    await terms.ended("flaky");
    terms.startTerm(new AbortController().signal);
    await terms.ended("flaky");
    expect(calls).toBe(2);
    expect(lines).toEqual([
      expect.objectContaining({ work: "flaky", err: "no informer", msg: "leader work failed" }),
    ]);
  });

  it("refuses a work registered twice or after a term started, and an unknown name", () => {
    const terms = new LeadershipTerms(silent);
    terms.add("a", async () => {});
    expect(() => terms.add("a", async () => {})).toThrow(/registered twice/);
    terms.startTerm(new AbortController().signal);
    expect(() => terms.add("b", async () => {})).toThrow(/registered after a term started/);
    expect(() => terms.ended("c")).toThrow(/no leader work named "c"/);
  });
});
