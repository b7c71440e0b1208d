// A received-frame log with "wait until a frame like this arrives", shared by the
// scripted agent and the raw session client. Frames are decoded with the codec so tests read payloads
// as typed messages; waiting is event-driven (no polling) with a deadline for failures.
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import { decodePayload, readHeader, type DecodedHeader } from "../../proto/frame-codec.js";

export interface ReceivedFrame extends DecodedHeader {
  raw: Buffer;
  /** Decodes the payload as `schema`. */
  as<S extends DescMessage>(schema: S): MessageShape<S>;
}

export function toReceived(raw: Buffer, maxPayloadBytes?: number): ReceivedFrame {
  const header = readHeader(raw, maxPayloadBytes);
  return { ...header, raw, as: (schema) => decodePayload(raw, schema) };
}

export class FrameTimeoutError extends Error {
  readonly code = "SWITCHYARD_TEST_FRAME_TIMEOUT";
}

type Waiter = { pred: (f: ReceivedFrame) => boolean; resolve: (f: ReceivedFrame) => void };

export class FrameInbox {
  /** Every frame received, in order. */
  readonly all: ReceivedFrame[] = [];
  private readonly waiters = new Set<Waiter>();

  /** True when someone waits for a frame (lets non-recording peers skip decoding). */
  get hasWaiters(): boolean {
    return this.waiters.size > 0;
  }

  /** Records `f` (unless `store` is false) and wakes matching waiters. */
  push(f: ReceivedFrame, store = true): void {
    if (store) this.all.push(f);
    for (const w of this.waiters)
      if (w.pred(f)) {
        this.waiters.delete(w);
        w.resolve(f);
      }
  }

  /** The first frame (already received or future) matching `pred`. */
  waitFor(pred: (f: ReceivedFrame) => boolean, timeoutMs = 5000, what = "frame"): Promise<ReceivedFrame> {
    const found = this.all.find(pred);
    if (found) return Promise.resolve(found);
    return this.next(pred, timeoutMs, what);
  }

  /** The next frame received from now on matching `pred`. */
  next(pred: (f: ReceivedFrame) => boolean, timeoutMs = 5000, what = "frame"): Promise<ReceivedFrame> {
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        pred,
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(w);
        reject(new FrameTimeoutError(`no ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.add(w);
    });
  }

  count(pred: (f: ReceivedFrame) => boolean): number {
    let n = 0;
    for (const f of this.all) if (pred(f)) n++;
    return n;
  }

  clear(): void {
    this.all.length = 0;
  }
}
