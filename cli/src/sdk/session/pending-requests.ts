// Requests waiting for their reply: request ids (2 … 0xfffffff0, wrapping; 1 is the
// Hello's), the reply frame that settles one (matched on id and family), a ProtocolError
// that rejects one, and one coarse sweep that times out those left unanswered — no timer
// per request. A deadline counts only time the session read its router connection: while
// reading is held (a local program is slow), replies may be waiting unread in our own
// socket, so the clock of every waiting request stops (`hold`/`release`).
import * as pb from "../../../../proto/gen/session_pb.js";
import { CliError, CliErrorCode } from "../cli-errors.js";

interface Pending {
  family: number;
  deadline: number;
  resolve(frame: Buffer): void;
  reject(err: Error): void;
}

const FIRST_ID = 2;
const LAST_ID = 0xfffffff0;
const SWEEP_MS = 500;

export class PendingRequests {
  readonly #pending = new Map<number, Pending>();
  #nextId = FIRST_ID;
  #sweep: NodeJS.Timeout | undefined;
  #heldSince: number | undefined;

  constructor(
    /** Reply deadline of a request, ms. */
    private readonly timeoutMs: number,
  ) {}

  /** Registers a request of `family`: its id and the reply it will get. */
  add(family: number): { requestId: number; reply: Promise<Buffer> } {
    const requestId = this.#nextId;
    this.#nextId = this.#nextId >= LAST_ID ? FIRST_ID : this.#nextId + 1;
    const reply = new Promise<Buffer>((resolve, reject) =>
      this.#pending.set(requestId, { family, deadline: Date.now() + this.timeoutMs, resolve, reject }),
    );
    return { requestId, reply };
  }

  /** Forgets a request that could not be sent. */
  forget(requestId: number): void {
    this.#pending.delete(requestId);
  }

  /** Settles the request a reply frame answers; false when none of that family waits for it. */
  settle(requestId: number, family: number, frame: Buffer): boolean {
    const p = this.#pending.get(requestId);
    if (!p || p.family !== family) return false;
    this.#pending.delete(requestId);
    p.resolve(frame);
    return true;
  }

  /** Rejects one request (a ProtocolError about it); false when nothing waits on that id. */
  reject(requestId: number, err: Error): boolean {
    const p = requestId ? this.#pending.get(requestId) : undefined;
    if (!p) return false;
    this.#pending.delete(requestId);
    p.reject(err);
    return true;
  }

  /** Rejects every waiting request. */
  failAll(err: Error): void {
    for (const [id, p] of this.#pending) {
      this.#pending.delete(id);
      p.reject(err);
    }
  }

  /** Reading the router stopped: deadlines stop running. */
  hold(now = Date.now()): void {
    this.#heldSince ??= now;
  }

  /** Reading resumed: each deadline moves on by the time it waited while reading was held. */
  release(now = Date.now()): void {
    const since = this.#heldSince;
    if (since === undefined) return;
    this.#heldSince = undefined;
    for (const p of this.#pending.values()) p.deadline += now - Math.max(since, p.deadline - this.timeoutMs);
  }

  startSweep(): void {
    this.#sweep = setInterval(() => this.#timeOut(), SWEEP_MS);
    this.#sweep.unref();
  }

  stopSweep(): void {
    clearInterval(this.#sweep);
  }

  #timeOut(): void {
    if (this.#heldSince !== undefined) return;
    const now = Date.now();
    for (const [id, p] of this.#pending)
      if (p.deadline <= now) {
        this.#pending.delete(id);
        p.reject(
          new CliError(
            CliErrorCode.REQUEST_TIMEOUT,
            `no answer to a ${pb.FrameFamily[p.family] ?? p.family} request within ${this.timeoutMs} ms; ` +
              "the Default cluster may be unreachable (see `switchyard status`)",
          ),
        );
      }
  }
}
