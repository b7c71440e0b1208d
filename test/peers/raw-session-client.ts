// A minimal session client for router and agent tests and benchmarks, speaking raw frames
// (the typed CLI SDK client is cli/src/sdk's SessionClient): connects to a router's
// /v1/sessions/{id} with the session secret, says Hello, and offers request/response
// helpers over the codec. Upgrade refusals surface as UpgradeRefusedError with the HTTP
// status, Retry-After and the router's error code.
import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import WebSocket from "ws";
import * as pb from "../../proto/gen/session_pb.js";
import { encodeFrame, type FrameHeader } from "../../proto/frame-codec.js";
import { PROTOCOL_VERSION_MAX, PROTOCOL_VERSION_MIN } from "../../proto/frame-version.js";
import { FrameInbox, toReceived, type ReceivedFrame } from "./frame-inbox.js";

const F = pb.FrameFamily;

export class UpgradeRefusedError extends Error {
  readonly code = "SWITCHYARD_TEST_UPGRADE_REFUSED";
  constructor(
    readonly status: number,
    readonly body: { code?: string; message?: string },
    readonly retryAfter: string | undefined,
  ) {
    super(`router refused the upgrade: ${status} ${body.code ?? ""} ${body.message ?? ""}`);
  }
}

export interface ConnectOptions {
  /** Send Hello and wait for HelloAck (default true). */
  hello?: boolean;
  /** Record received frames (default true). */
  record?: boolean;
  versions?: { min: number; max: number };
  /** Custom "Authorization" header value (default `Bearer <secret>`; null omits it). */
  authorization?: string | null;
  /** PEM CA verifying a wss:// router. */
  ca?: string;
}

export class RawSessionClient {
  readonly inbox = new FrameInbox();
  private nextRequest = 1;
  closed: { code: number; reason: string } | undefined;
  private readonly closeWaiters: Array<(c: { code: number; reason: string }) => void> = [];
  /** Called for every raw frame (benchmarks), in addition to recording. */
  onRaw: ((buf: Buffer) => void) | undefined;

  private constructor(
    readonly ws: WebSocket,
    private record: boolean,
  ) {
    ws.on("message", (data: Buffer) => {
      this.onRaw?.(data);
      if (this.record) this.inbox.push(toReceived(data));
      else if (this.inbox.hasWaiters) this.inbox.push(toReceived(data), false);
    });
    ws.on("close", (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      for (const w of this.closeWaiters.splice(0)) w(this.closed);
    });
    ws.on("error", () => {});
  }

  static async connect(url: string, secret: string, opts: ConnectOptions = {}): Promise<RawSessionClient> {
    const headers: Record<string, string> = {};
    if (opts.authorization !== null) headers.authorization = opts.authorization ?? `Bearer ${secret}`;
    const ws = new WebSocket(url, {
      headers,
      perMessageDeflate: false,
      skipUTF8Validation: true,
      ...(opts.ca ? { ca: opts.ca } : {}),
    });
    ws.binaryType = "nodebuffer";
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("unexpected-response", (_req, res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        res.on("end", () => {
          let parsed: { code?: string; message?: string } = {};
          try {
            parsed = JSON.parse(body) as typeof parsed;
          } catch {
            parsed = { message: body };
          }
          reject(
            new UpgradeRefusedError(
              res.statusCode ?? 0,
              parsed,
              res.headers["retry-after"] as string | undefined,
            ),
          );
        });
      });
      ws.once("error", reject);
    });
    const client = new RawSessionClient(ws, opts.record ?? true);
    if (opts.hello ?? true) {
      const v = opts.versions ?? { min: PROTOCOL_VERSION_MIN, max: PROTOCOL_VERSION_MAX };
      const ack = await client.request({ family: F.CONTROL, kind: pb.ControlKind.HELLO }, pb.HelloSchema, {
        minVersion: v.min,
        maxVersion: v.max,
        peer: "test-client",
      });
      if (ack.kind !== pb.ControlKind.HELLO_ACK)
        throw new Error(`hello refused: ${ack.as(pb.ProtocolErrorSchema).message}`);
    }
    return client;
  }

  /** Stops keeping received frames (waiters still work) and forgets the ones kept. */
  stopRecording(): void {
    this.record = false;
    this.inbox.clear();
  }

  newRequestId(): number {
    return this.nextRequest++;
  }

  send(buf: Buffer): void {
    this.ws.send(buf);
  }

  /** Sends a frame with a fresh request id and waits for its reply (same request id, or an error). */
  async request<S extends DescMessage>(
    header: Partial<FrameHeader> & { family: number; kind: number },
    schema: S,
    init: MessageInitShape<S>,
    timeoutMs = 5000,
  ): Promise<ReceivedFrame> {
    const requestId = header.requestId ?? this.newRequestId();
    const wait = this.inbox.next(
      (f) =>
        f.requestId === requestId &&
        (f.family === header.family || (f.family === F.CONTROL && f.kind === pb.ControlKind.ERROR)),
      timeoutMs,
      `reply to request ${requestId} (family ${header.family})`,
    );
    this.ws.send(encodeFrame({ ...header, requestId }, schema, init));
    return wait;
  }

  /** Broadcast ping; resolves with the merged pong (or error). */
  ping(timeoutMs = 5000): Promise<ReceivedFrame> {
    return this.request(
      { family: F.PING, kind: pb.PingKind.PING },
      pb.PingSchema,
      { sentAtMicros: BigInt(Date.now()) * 1000n },
      timeoutMs,
    );
  }

  subscribe(
    subscriptionId: number,
    port: number,
    mode: "mirror" | "steal" = "steal",
  ): Promise<ReceivedFrame> {
    const kind = mode === "mirror" ? pb.SubscriptionKind.MIRROR : pb.SubscriptionKind.STEAL;
    return this.request({ family: F.SUBSCRIPTION, kind, connectionId: subscriptionId }, pb.SubscribeSchema, {
      port,
    });
  }

  unsubscribe(subscriptionId: number, port: number): Promise<ReceivedFrame> {
    return this.request(
      { family: F.SUBSCRIPTION, kind: pb.SubscriptionKind.UNSUBSCRIBE, connectionId: subscriptionId },
      pb.UnsubscribeSchema,
      { port },
    );
  }

  /** Waits until the router reports `cluster` in `state` (UpstreamStatus control frame). */
  upstreamStatus(
    cluster: string,
    state: pb.UpstreamState,
    timeoutMs = 10_000,
    fromNow = false,
  ): Promise<ReceivedFrame> {
    const pred = (f: ReceivedFrame) =>
      f.family === F.CONTROL &&
      f.kind === pb.ControlKind.UPSTREAM_STATUS &&
      f.as(pb.UpstreamStatusSchema).cluster === cluster &&
      f.as(pb.UpstreamStatusSchema).state === state;
    return fromNow
      ? this.inbox.next(pred, timeoutMs, `${cluster} ${pb.UpstreamState[state]}`)
      : this.inbox.waitFor(pred, timeoutMs, `${cluster} ${pb.UpstreamState[state]}`);
  }

  /** Resolves when the router closes the socket. */
  waitClosed(timeoutMs = 5000): Promise<{ code: number; reason: string }> {
    if (this.closed) return Promise.resolve(this.closed);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`socket not closed within ${timeoutMs} ms`)), timeoutMs);
      this.closeWaiters.push((c) => {
        clearTimeout(t);
        resolve(c);
      });
    });
  }

  close(): void {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING)
      this.ws.terminate();
  }
}
