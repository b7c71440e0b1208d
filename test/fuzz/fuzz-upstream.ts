// A hostile upstream for the router fuzz suite: it accepts the router's session WebSocket,
// answers Hello, pings and subscriptions like an agent (so the session it serves stays
// usable), records every frame the router sends it — the router's error frames included —
// and sends whatever the test gives it, text messages too (test/peers' ScriptedAgent only
// sends binary frames).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer, type WebSocket } from "ws";
import { checkFrame, encodeFrame, encodeRaw, FrameCheck, HEADER_BYTES } from "../../proto/frame-codec.js";
import { PROTOCOL_VERSION_MAX } from "../../proto/frame-version.js";
import * as pb from "../../proto/gen/session_pb.js";
import { bearerSecret } from "../../proto/session-auth.js";
import { FrameInbox, toReceived } from "../peers/frame-inbox.js";

const F = pb.FrameFamily;

export class FuzzUpstream {
  readonly inbox = new FrameInbox();
  private server: Server | undefined;
  private current: WebSocket | undefined;
  private port = 0;

  constructor(private readonly secret: string) {}

  async start(): Promise<void> {
    const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, skipUTF8Validation: true });
    const server = createServer((_req, res) => res.writeHead(404).end());
    server.on("upgrade", (req, socket, head) => {
      if (bearerSecret(req.headers) !== this.secret) {
        socket.end("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n");
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  url(sessionId: string): string {
    return `ws://127.0.0.1:${this.port}/v1/sessions/${sessionId}`;
  }

  /** True while a router's link has said Hello and is open. */
  get connected(): boolean {
    return this.current !== undefined;
  }

  /** Sends one WebSocket message (binary for a Buffer, text for a string) on the open link. */
  send(message: Buffer | string): void {
    if (!this.current) throw new Error("no router link is open");
    this.current.send(message);
  }

  async stop(): Promise<void> {
    this.current?.terminate();
    this.server?.closeAllConnections();
    await new Promise((r) => this.server?.close(r));
  }

  private accept(ws: WebSocket): void {
    ws.binaryType = "nodebuffer";
    ws.on("error", () => undefined);
    ws.on("close", () => {
      if (this.current === ws) this.current = undefined;
    });
    ws.on("message", (data: Buffer, isBinary) => {
      if (!isBinary || checkFrame(data) !== FrameCheck.Ok) return;
      const f = toReceived(data);
      this.inbox.push(f);
      const hdr = { requestId: f.requestId, connectionId: f.connectionId };
      if (f.family === F.CONTROL && f.kind === pb.ControlKind.HELLO) {
        this.current = ws;
        ws.send(
          encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.HELLO_ACK, ...hdr }, pb.HelloAckSchema, {
            version: PROTOCOL_VERSION_MAX,
            peer: "fuzz-upstream",
          }),
        );
      } else if (f.family === F.PING) {
        ws.send(encodeRaw({ family: F.PING, kind: pb.PingKind.PONG, ...hdr }, data.subarray(HEADER_BYTES)));
      } else if (f.family === F.SUBSCRIPTION) {
        ws.send(
          encodeFrame(
            { family: F.SUBSCRIPTION, kind: pb.SubscriptionKind.RESULT, ...hdr },
            pb.SubscriptionResultSchema,
            { ok: true },
          ),
        );
      }
    });
  }
}
