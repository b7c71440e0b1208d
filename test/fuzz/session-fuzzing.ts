// The harness of the session-endpoint fuzz suites: throws fuzzed messages at one session
// one at a time and checks each against its verdict (frame-verdicts.ts) — the precise
// error frame (code, request id, a message naming the field) or close code it must get —
// while tallying what the endpoint must have counted; keeps a well-behaved session busy
// (pings and echoed data) the whole time and records any round that failed; reads
// counters from a Prometheus /metrics page.
import { ErrorCode, isErrorCode } from "../../proto/error-codes.js";
import * as pb from "../../proto/gen/session_pb.js";
import type { AgentClient } from "../peers/agent-client.js";
import type { ReceivedFrame } from "../peers/frame-inbox.js";
import type { RawSessionClient } from "../peers/raw-session-client.js";
import { describeInput, MESSAGE_NAMES, type FuzzInput } from "./frame-arbitraries.js";
import type { Verdict } from "./frame-verdicts.js";

const isError = (f: ReceivedFrame) => f.family === pb.FrameFamily.CONTROL && f.kind === pb.ControlKind.ERROR;

/** Counts by code of what one batch made the endpoint answer or count silently. */
export class Tally {
  readonly byCode = new Map<string, number>();
  add(code: string): void {
    this.byCode.set(code, (this.byCode.get(code) ?? 0) + 1);
  }
  get(code: string): number {
    return this.byCode.get(code) ?? 0;
  }
}

export interface BatchResult {
  tally: Tally;
  /** The close code the endpoint ended the socket with, when a verdict said it would. */
  closedWith?: number;
}

/**
 * Sends `inputs` on `client` one by one. `verdictOf` is asked for each (and may update its
 * own state); an answer is awaited (code and request id) before the next input is sent,
 * and its message must name what to fix. Returns the tally of answers and silent counts.
 */
export async function throwInputs(
  client: RawSessionClient,
  inputs: readonly FuzzInput[],
  verdictOf: (input: FuzzInput) => Verdict | "ignored",
  timeoutMs = 5000,
): Promise<BatchResult> {
  const tally = new Tally();
  for (const [i, input] of inputs.entries()) {
    const v = verdictOf(input);
    const what = `input #${i} ${describeInput(input)}`;
    const answer =
      v !== "ignored" && "answer" in v
        ? client.inbox.next(
            (f) =>
              isError(f) && f.as(pb.ProtocolErrorSchema).code === v.answer && f.requestId === v.requestId,
            timeoutMs,
            `${v.answer} (request ${v.requestId}) for ${what}`,
          )
        : undefined;
    client.ws.send(input.text ? input.string : input.bytes);
    if (v === "ignored" || "passes" in v) continue;
    if ("silent" in v) {
      tally.add(v.silent);
      continue;
    }
    const err = (await answer!).as(pb.ProtocolErrorSchema);
    const names = MESSAGE_NAMES[v.answer];
    if (names && !names.test(err.message))
      throw new Error(`${v.answer} for ${what} does not say what to fix: ${JSON.stringify(err.message)}`);
    tally.add(v.answer);
    if (v.closes !== undefined) {
      const closed = await client.waitClosed(timeoutMs);
      if (closed.code !== v.closes)
        throw new Error(`${what} closed the socket with ${closed.code}, not ${v.closes}`);
      return { tally, closedWith: closed.code };
    }
  }
  return { tally };
}

/** Every error frame `client` received carries a catalogue code and a message. */
export function vagueErrors(client: RawSessionClient): string[] {
  const bad: string[] = [];
  for (const f of client.inbox.all) {
    if (!isError(f)) continue;
    const e = f.as(pb.ProtocolErrorSchema);
    if (!isErrorCode(e.code) || e.message.trim() === "") bad.push(`${e.code}: ${JSON.stringify(e.message)}`);
  }
  return bad;
}

/**
 * A well-behaved session kept busy while another is fuzzed: every round is a protocol ping
 * (answered with a pong: through a router every named cluster must be OK) and a chunk of
 * data through an outgoing TCP stream to an echo server, read back whole. The first round
 * that fails is recorded and ends the loop.
 */
export class BystanderTraffic {
  rounds = 0;
  readonly failures: string[] = [];
  private running: Promise<void> | undefined;
  private stopped = false;
  private sent = "";

  constructor(
    private readonly client: AgentClient,
    private readonly streamId: number,
    private readonly clusters: readonly string[] = [],
  ) {}

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.round();
        this.rounds++;
      } catch (err) {
        this.failures.push(`round ${this.rounds}: ${(err as Error).message}`);
        return;
      }
    }
  }

  private async round(): Promise<void> {
    const pong = await this.client.ping();
    for (const cluster of this.clusters) {
      const h = pong.clusters.find((c) => c.cluster === cluster);
      if (h?.state !== pb.HealthState.OK)
        throw new Error(
          `pong reports ${cluster} ${h ? pb.HealthState[h.state] : "missing"}: ${h?.error ?? ""}`,
        );
    }
    const chunk = `round-${this.rounds};`;
    this.sent += chunk;
    this.client.tcpSend(this.streamId, chunk);
    const deadline = Date.now() + 5000;
    while (this.client.tcpReceived(this.streamId).toString() !== this.sent) {
      if (Date.now() > deadline)
        throw new Error(
          `echo stalled: ${this.client.tcpReceived(this.streamId).length}/${this.sent.length} bytes back`,
        );
      await new Promise((r) => setTimeout(r, 2));
    }
  }
}

/** Sums the samples of counter `name` whose labels include `labels`, from a /metrics page. */
export function metricValue(page: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of page.split("\n")) {
    const m = /^([^{ ]+)(\{[^}]*\})? (.+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const l = m[2] ?? "";
    if (Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`))) total += Number(m[3]);
  }
  return total;
}

/** Every value of `label` among the samples of `name` (to check a label set stays bounded). */
export function labelValues(page: string, name: string, label: string): string[] {
  const values = new Set<string>();
  const re = new RegExp(`${label}="([^"]*)"`);
  for (const line of page.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    const m = re.exec(line);
    if (m) values.add(m[1]!);
  }
  return [...values].sort();
}

/** Codes no other path of an endpoint produces: their counts must equal the verdicts' exactly. */
export const FIRST_LINE_CODES: readonly string[] = [
  ErrorCode.FRAME_TRUNCATED,
  ErrorCode.FRAME_BAD_LENGTH,
  ErrorCode.FRAME_OVERSIZED,
  ErrorCode.FRAME_RESERVED_BITS,
  ErrorCode.FRAME_UNKNOWN_FAMILY,
  ErrorCode.FRAME_UNKNOWN_KIND,
  ErrorCode.FRAME_NOT_BINARY,
  ErrorCode.FRAME_WRONG_DIRECTION,
  ErrorCode.HELLO_REQUIRED,
  ErrorCode.PROTOCOL_VERSION_UNSUPPORTED,
];
