// Opening one WebSocket to a router for a session: `Authorization: Bearer <secret>` on the
// upgrade, then Hello/HelloAck. The router's refusals (read with the session endpoint's
// `parseRefusal`) become CLI errors that decide what the caller does next: 404 (session
// unknown or secret wrong — routers answer both alike, so nobody can probe which sessions
// exist: gone for good once the creation grace is over), 401 (no secret: fatal), 503 + Retry-After (still being
// created: wait and retry), network errors (retry). Every frame is masked with a fresh
// random key (ws's default), as RFC 6455 requires of clients: with a known mask the
// client's payload would choose the bytes an intermediary sees on the wire (the attack
// masking exists to stop), and a TLS-terminating proxy sees them even over wss://.
import type { Socket } from "node:net";
import WebSocket from "ws";
import * as pb from "../../../../proto/gen/session_pb.js";
import { decodeFrame, encodeFrame } from "../../../../proto/frame-codec.js";
import { PROTOCOL_VERSION_MAX, PROTOCOL_VERSION_MIN } from "../../../../proto/frame-version.js";
import { ErrorCode } from "../../../../proto/error-codes.js";
import { bearerHeader } from "../../../../proto/session-auth.js";
import { parseRefusal } from "../../../../proto/session-endpoint.js";
import { CliError, CliErrorCode, hasCliCode } from "../cli-errors.js";

export const CLIENT_PEER = "switchyard-cli/0.1.0";

/** A refusal or failure while dialing; `retryAfterMs` is set on 503. */
export class RouterDialError extends CliError {
  constructor(
    code: CliErrorCode,
    message: string,
    readonly status: number,
    readonly retryAfterMs?: number,
    cause?: unknown,
  ) {
    super(code, message, { cause });
  }
}

export interface DialOptions {
  /** PEM CA bundle verifying a wss:// router (default: system roots). */
  caPem?: string;
  /** Give up on one dial after this many ms (default 10 000). */
  timeoutMs?: number;
}

export interface DialedRouter {
  ws: WebSocket;
  /** The TCP (or TLS) socket under `ws`, for write coalescing. */
  socket: Socket | undefined;
  version: number;
  peer: string;
  /**
   * Hands every later frame to `handler`, first the ones that arrived right behind the
   * HelloAck (ws may emit several messages in one tick, before the caller is attached).
   */
  takeOver(handler: (data: Buffer) => void): void;
}

/** True for errors after which the session cannot come back: stop retrying. */
export function isFatalDialError(err: unknown): boolean {
  return hasCliCode(
    err,
    CliErrorCode.SESSION_NOT_FOUND,
    CliErrorCode.SESSION_UNAUTHORIZED,
    CliErrorCode.PROTOCOL_VERSION,
  );
}

export function dialRouter(url: string, secret: string, opts: DialOptions = {}): Promise<DialedRouter> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  return new Promise<DialedRouter>((resolve, reject) => {
    const ws = new WebSocket(url, {
      headers: bearerHeader(secret),
      perMessageDeflate: false,
      skipUTF8Validation: true,
      handshakeTimeout: timeoutMs,
      ...(opts.caPem ? { ca: opts.caPem } : {}),
    });
    ws.binaryType = "nodebuffer";
    let socket: Socket | undefined;
    ws.once("upgrade", (res) => (socket = res.socket as Socket));
    let settled = false;
    const fail = (e: CliError) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      ws.removeAllListeners("message");
      ws.terminate();
      reject(e);
    };
    const timer = setTimeout(
      () =>
        fail(
          new RouterDialError(
            CliErrorCode.ROUTER_UNAVAILABLE,
            `router ${url} did not answer within ${timeoutMs} ms`,
            0,
          ),
        ),
      timeoutMs,
    );
    ws.on("error", (err) =>
      fail(
        new RouterDialError(
          CliErrorCode.ROUTER_UNAVAILABLE,
          `cannot reach router ${url}: ${err.message}`,
          0,
          undefined,
          err,
        ),
      ),
    );
    ws.once("close", () =>
      fail(new RouterDialError(CliErrorCode.ROUTER_UNAVAILABLE, `router ${url} closed the connection`, 0)),
    );
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => {
        const refusal = parseRefusal(res.statusCode ?? 0, body, res.headers["retry-after"]);
        const { status } = refusal;
        const detail = `${refusal.code} ${refusal.message}`.trim();
        if (status === 404)
          return fail(
            new RouterDialError(
              CliErrorCode.SESSION_NOT_FOUND,
              `router ${url} does not know the session (${detail || "404"}): it was deleted or expired, or its secret does not match`,
              status,
            ),
          );
        if (status === 401 || status === 403)
          return fail(
            new RouterDialError(
              CliErrorCode.SESSION_UNAUTHORIZED,
              `router ${url} refused the session (${detail || status}): the session secret is missing or not accepted`,
              status,
            ),
          );
        fail(
          new RouterDialError(
            CliErrorCode.ROUTER_UNAVAILABLE,
            `router ${url} answered ${status}${detail ? ` (${detail})` : ""}`,
            status,
            refusal.retryAfterMs,
          ),
        );
      });
    });
    ws.once("open", () => {
      let early: Buffer[] | undefined;
      let handler: ((data: Buffer) => void) | undefined;
      const takeOver = (h: (data: Buffer) => void) => {
        handler = h;
        for (const b of early?.splice(0) ?? []) h(b);
      };
      ws.on("message", (data: Buffer) => {
        if (handler) return handler(data);
        if (early) return void early.push(data);
        try {
          const f = decodeFrame(data);
          if (f.header.family === pb.FrameFamily.CONTROL && f.header.kind === pb.ControlKind.HELLO_ACK) {
            const ack = f.message as pb.HelloAck;
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            ws.removeAllListeners("close");
            ws.removeAllListeners("error");
            early = [];
            return resolve({ ws, socket, version: ack.version, peer: ack.peer, takeOver });
          }
          const e = f.message as pb.ProtocolError;
          fail(
            new RouterDialError(
              e.code === ErrorCode.PROTOCOL_VERSION_UNSUPPORTED
                ? CliErrorCode.PROTOCOL_VERSION
                : CliErrorCode.ROUTER_UNAVAILABLE,
              `router ${url} refused Hello: ${e.code} ${e.message}; upgrade the CLI if versions differ`,
              0,
            ),
          );
        } catch (err) {
          fail(
            new RouterDialError(
              CliErrorCode.ROUTER_UNAVAILABLE,
              `router ${url} answered Hello with a bad frame: ${(err as Error).message}`,
              0,
            ),
          );
        }
      });
      ws.send(
        encodeFrame(
          { family: pb.FrameFamily.CONTROL, kind: pb.ControlKind.HELLO, requestId: 1 },
          pb.HelloSchema,
          {
            minVersion: PROTOCOL_VERSION_MIN,
            maxVersion: PROTOCOL_VERSION_MAX,
            peer: CLIENT_PEER,
          },
        ),
      );
    });
  });
}
