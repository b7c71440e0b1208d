// The gauge of sessions refused as invalid, by reason: read at scrape from whatever the
// caller lists (the Primary's parents, a member's ClusterSessions) as the reasons of their
// `Valid=False` conditions. The label set is bounded: the allow-list's refusal reasons,
// anything else is "Other" — never a session id.
import { Gauge, type Registry } from "prom-client";
import { ALLOW_LIST_REFUSALS } from "./session-allow-list.js";

/** Reasons of every `Valid=False` condition among `objects`. */
export function refusalReasons(
  objects: Iterable<{ status?: { conditions?: Array<{ type: string; status: string; reason: string }> } }>,
): string[] {
  const out: string[] = [];
  for (const o of objects)
    for (const c of o.status?.conditions ?? [])
      if (c.type === "Valid" && c.status === "False") out.push(c.reason);
  return out;
}

export function refusalGauge(
  registry: Registry,
  name: string,
  help: string,
  reasons: () => Iterable<string>,
): Gauge<"reason"> {
  return new Gauge({
    name,
    help,
    labelNames: ["reason"],
    registers: [registry],
    collect() {
      this.reset();
      const known: readonly string[] = ALLOW_LIST_REFUSALS;
      const n = new Map<string, number>([...known, "Other"].map((r) => [r, 0]));
      for (const r of reasons()) {
        const reason = known.includes(r) ? r : "Other";
        n.set(reason, n.get(reason)! + 1);
      }
      for (const [reason, v] of n) this.set({ reason }, v);
    },
  });
}
