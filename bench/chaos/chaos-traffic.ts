// Steady traffic for the chaos bench, and how its failures are explained. Requests go out at
// a fixed rate (open loop: a slow answer never delays the next request), spread over every
// target and over two kinds of connection — a fresh one per request (kube-proxy picks a
// replica each time) and kept-alive ones — each with a deadline. Every request is recorded
// with when it started and ended and how it ended; `explainFailures` then sets each request
// against the disruptions the bench caused (a router pod deleted, an API server stopped). A
// session owes every request an answer from the developer's local app, so:
//   - excused: a reported failure (a status >= 500 or a connection error) of a request in
//     flight at the instant a disruption began (started before it, ended after it), each
//     listed with its target and connection;
//   - lost: every other request the local app did not answer — a failure that started while a
//     disruption was in progress or with none near it, no answer before the deadline (the
//     caller would hang), and an answer from anyone else (the app in the pod: the session did
//     not get it), which is also counted on its own as a wrong answerer.
import { Agent, request } from "node:http";
import { sleep } from "../../lib/abortable-sleep.js";
import { pct, round } from "../support/stats-support.js";

export type Outcome = "local" | "app" | "other" | "http5xx" | "error" | "timeout";

export interface TrafficTarget {
  /** Names the target in the figures (the cluster). */
  name: string;
  /** Base URL: the cluster's demo NodePort. */
  url: string;
}

export interface TrafficOptions {
  targets: TrafficTarget[];
  /** Requests per second in all (default 20). */
  ratePerSecond: number;
  durationMs: number;
  /** A request not answered by then is unanswered (default 15 000). */
  timeoutMs: number;
  /** `x-served-by` of the local app (answers of the app in the pod start with "app-"). */
  localName?: string;
  /** Path prefix, so the app's logs tell the scenario (default /chaos). */
  path?: string;
}

export interface RequestRecord {
  target: string;
  connection: "fresh" | "keep-alive";
  /** performance.now() at the start and at the end (answer read, error or deadline). */
  startAt: number;
  endAt: number;
  outcome: Outcome;
  status?: number;
  error?: string;
}

export interface Disruption {
  what: string;
  startAt: number;
  /** When its effects were over (Infinity: never within the run). */
  endAt: number;
}

/** One GET with a deadline; never rejects. */
export function timedGet(
  target: TrafficTarget,
  path: string,
  agent: Agent | false,
  timeoutMs: number,
  localName: string,
): Promise<RequestRecord> {
  const startAt = performance.now();
  const connection = agent ? "keep-alive" : "fresh";
  return new Promise((resolve) => {
    let done = false;
    const finish = (r: Pick<RequestRecord, "outcome" | "status" | "error">) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ target: target.name, connection, startAt, endAt: performance.now(), ...r });
    };
    const req = request(`${target.url}${path}`, { agent }, (res) => {
      const status = res.statusCode ?? 0;
      res.on("data", () => {});
      res.on("error", (err) => finish({ outcome: "error", status, error: err.message }));
      res.on("aborted", () => finish({ outcome: "error", status, error: "answer cut short" }));
      res.on("end", () => {
        const by = String(res.headers["x-served-by"] ?? "");
        const outcome: Outcome =
          status >= 500 ? "http5xx" : by === localName ? "local" : by.startsWith("app-") ? "app" : "other";
        finish({ outcome, status });
      });
    });
    const timer = setTimeout(() => {
      finish({ outcome: "timeout", error: `no answer in ${timeoutMs} ms` });
      req.destroy();
    }, timeoutMs);
    req.on("error", (err) =>
      finish({ outcome: "error", error: (err as NodeJS.ErrnoException).code ?? err.message }),
    );
    req.end();
  });
}

/** Runs the traffic for `durationMs` and resolves once every request has ended. */
export async function steadyTraffic(o: TrafficOptions): Promise<RequestRecord[]> {
  const localName = o.localName ?? "local";
  const path = o.path ?? "/chaos";
  const agents = o.targets.map(() => new Agent({ keepAlive: true, maxSockets: 4 }));
  const kinds = o.targets.flatMap((t, i) => [
    { target: t, agent: false as const },
    { target: t, agent: agents[i]! },
  ]);
  const interval = 1000 / o.ratePerSecond;
  const t0 = performance.now();
  const pending: Promise<RequestRecord>[] = [];
  try {
    for (let i = 0; ; i++) {
      if (i * interval >= o.durationMs) break;
      const due = t0 + i * interval;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const k = kinds[i % kinds.length]!;
      pending.push(timedGet(k.target, `${path}/${i}`, k.agent, o.timeoutMs, localName));
    }
    return await Promise.all(pending);
  } finally {
    for (const a of agents) a.destroy();
  }
}

export interface FailureBreakdown {
  requests: number;
  answered: { local: number; app: number; other: number };
  /** Reported failures of requests in flight at the instant a disruption began: excused. */
  inFlightAtDisruption: number;
  /** Each of those: target, connection, when, what it saw and the disruption. */
  inFlightExamples: string[];
  /** Reported failures of requests that started while a disruption was in progress: lost. */
  duringDisruption: number;
  /** Reported failures no disruption overlapped: lost. */
  unexplained: number;
  /** No answer before the deadline: lost. */
  unanswered: number;
  /** Answered, but not by the session's local app (the app in the pod, or anyone else): lost. */
  wrongAnswerer: number;
  /** Every request the local app did not answer, except the excused: during + unexplained + unanswered + wrong answerer. */
  lost: number;
  /** By outcome and error, for the reader (e.g. "error ECONNRESET": 3). */
  failureKinds: Record<string, number>;
  /** A few lost requests, for the record. */
  lostExamples: string[];
  /** Answered by the app in the pod instead of the session, while a disruption was / was not in progress. */
  appDuringDisruption: number;
  appOutsideDisruption: number;
  /** Those outside: on fresh / kept-alive connections, and how long after the last disruption ended, s. */
  appOutside: { fresh: number; keepAlive: number; afterLastDisruptionS: { p50: number; max: number } };
}

const overlaps = (r: RequestRecord, d: Disruption) => d.startAt <= r.endAt && d.endAt >= r.startAt;

export function explainFailures(
  records: readonly RequestRecord[],
  disruptions: readonly Disruption[],
  t0: number,
): FailureBreakdown {
  const b: FailureBreakdown = {
    requests: records.length,
    answered: { local: 0, app: 0, other: 0 },
    inFlightAtDisruption: 0,
    inFlightExamples: [],
    duringDisruption: 0,
    unexplained: 0,
    unanswered: 0,
    wrongAnswerer: 0,
    lost: 0,
    failureKinds: {},
    lostExamples: [],
    appDuringDisruption: 0,
    appOutsideDisruption: 0,
    appOutside: { fresh: 0, keepAlive: 0, afterLastDisruptionS: { p50: 0, max: 0 } },
  };
  const sinceDisruption: number[] = [];
  const at = (ms: number) => `${((ms - t0) / 1000).toFixed(2)} s`;
  for (const r of records) {
    if (r.outcome === "local" || r.outcome === "app" || r.outcome === "other") {
      b.answered[r.outcome]++;
      if (r.outcome !== "local") b.wrongAnswerer++;
      if (r.outcome === "app") {
        if (disruptions.some((d) => overlaps(r, d))) b.appDuringDisruption++;
        else {
          b.appOutsideDisruption++;
          b.appOutside[r.connection === "fresh" ? "fresh" : "keepAlive"]++;
          const ended = disruptions.filter((d) => d.endAt <= r.startAt).map((d) => d.endAt);
          if (ended.length) sinceDisruption.push((r.startAt - Math.max(...ended)) / 1000);
        }
      }
      continue;
    }
    const kind = r.outcome === "http5xx" ? `status ${r.status}` : `${r.outcome} ${r.error ?? ""}`.trim();
    b.failureKinds[kind] = (b.failureKinds[kind] ?? 0) + 1;
    const describe = () =>
      `${r.target} ${r.connection} ${at(r.startAt)} → ${at(r.endAt)}: ${kind}` +
      (disruptions.length ? ` (nearest disruption: ${nearest(r, disruptions, at)})` : "");
    if (r.outcome === "timeout") {
      b.unanswered++;
      if (b.lostExamples.length < 10) b.lostExamples.push(describe());
      continue;
    }
    // In flight at the instant a disruption began: the only failure a session is excused.
    const atKill = disruptions.find((x) => r.startAt < x.startAt && x.startAt <= r.endAt);
    if (atKill) {
      b.inFlightAtDisruption++;
      b.inFlightExamples.push(
        `${r.target} ${r.connection} ${at(r.startAt)} → ${at(r.endAt)}: ${kind} (at ${atKill.what})`,
      );
      continue;
    }
    if (disruptions.some((x) => overlaps(r, x))) b.duringDisruption++;
    else b.unexplained++;
    if (b.lostExamples.length < 10) b.lostExamples.push(describe());
  }
  b.lost = b.duringDisruption + b.unexplained + b.unanswered + b.wrongAnswerer;
  if (sinceDisruption.length)
    b.appOutside.afterLastDisruptionS = {
      p50: round(pct(sinceDisruption, 50), 2),
      max: round(Math.max(...sinceDisruption), 2),
    };
  return b;
}

function nearest(r: RequestRecord, ds: readonly Disruption[], at: (ms: number) => string): string {
  const dist = (d: Disruption) => Math.min(Math.abs(d.startAt - r.startAt), Math.abs(d.endAt - r.startAt));
  const d = [...ds].sort((a, b) => dist(a) - dist(b))[0]!;
  return `${d.what} ${at(d.startAt)} → ${Number.isFinite(d.endAt) ? at(d.endAt) : "end"}`;
}

/** One line for the console. */
export function breakdownLine(b: FailureBreakdown): string {
  return (
    `${b.requests} requests: ${b.answered.local} stolen, ${b.answered.app} answered by the app in the pod` +
    ` (${b.appDuringDisruption} during a disruption, ${b.appOutsideDisruption} outside` +
    (b.appOutsideDisruption
      ? `: ${b.appOutside.fresh} fresh / ${b.appOutside.keepAlive} kept-alive connections, ` +
        `${b.appOutside.afterLastDisruptionS.p50} s p50 / ${b.appOutside.afterLastDisruptionS.max} s max after the last disruption ended`
      : "") +
    `), ${b.answered.other} other;` +
    ` failed in flight at a disruption ${b.inFlightAtDisruption} (excused);` +
    ` lost ${b.lost} (failed during a disruption ${b.duringDisruption}, unexplained ${b.unexplained},` +
    ` unanswered ${b.unanswered}, wrong answerer ${b.wrongAnswerer})`
  );
}
