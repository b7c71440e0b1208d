// A typed protocol client for tests that talk to an agent directly (no router): one call
// per family, plus a traffic side that answers stolen HTTP requests with a handler and
// exposes stolen/mirrored raw connections as objects. Built on
// RawSessionClient (connect, Hello, request/reply matching); never used by production code.
import type { MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { decodePayload, encodeFrame } from "../../proto/frame-codec.js";
import * as pb from "../../proto/gen/session_pb.js";
import { RawSessionClient, type ConnectOptions } from "./raw-session-client.js";
import type { ReceivedFrame } from "./frame-inbox.js";
import { decodeStreamData, encodeStreamData } from "../../proto/stream-data-frame.js";

const F = pb.FrameFamily;

export class AgentReplyError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

/** A stolen or mirrored connection as the client sees it. */
export class RawConnection {
  readonly chunks: Buffer[] = [];
  closed: { error: string } | undefined;
  private waiters: Array<() => void> = [];

  constructor(
    private readonly client: AgentClient,
    readonly id: number,
    readonly info: MessageShape<typeof pb.NewConnectionSchema>,
  ) {}

  get received(): Buffer {
    return Buffer.concat(this.chunks);
  }

  write(data: Buffer | string): void {
    this.client.session.send(
      encodeStreamData(
        F.TRAFFIC,
        pb.TrafficKind.DATA,
        this.id,
        typeof data === "string" ? Buffer.from(data) : data,
      ),
    );
  }

  close(error = ""): void {
    this.client.session.send(
      encodeFrame(
        { family: F.TRAFFIC, kind: pb.TrafficKind.CLOSE, connectionId: this.id },
        pb.StreamCloseSchema,
        { error },
      ),
    );
  }

  /** @internal */
  push(data: Buffer | undefined, closedWith?: string): void {
    if (data) this.chunks.push(data);
    if (closedWith !== undefined) this.closed = { error: closedWith };
    for (const w of this.waiters.splice(0)) w();
  }

  /** Resolves when `pred` holds (checked on every data or close). */
  until(pred: (c: RawConnection) => boolean, timeoutMs = 5000, what = "connection state"): Promise<void> {
    if (pred(this)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const t = setTimeout(
        () =>
          reject(
            new Error(
              `connection ${this.id}: no ${what} within ${timeoutMs} ms (got ${this.received.length} bytes)`,
            ),
          ),
        timeoutMs,
      );
      const check = () => {
        if (pred(this)) {
          clearTimeout(t);
          resolve();
        } else this.waiters.push(check);
      };
      this.waiters.push(check);
    });
  }

  untilText(text: string, timeoutMs = 5000): Promise<void> {
    return this.until((c) => c.received.toString("latin1").includes(text), timeoutMs, JSON.stringify(text));
  }

  untilClosed(timeoutMs = 5000): Promise<void> {
    return this.until((c) => c.closed !== undefined, timeoutMs, "close");
  }
}

export type HttpHandler = (req: MessageShape<typeof pb.HttpRequestSchema>) => {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
};

export class AgentClient {
  readonly connections = new Map<number, RawConnection>();
  /** Every connection announced, in order. */
  readonly announced: RawConnection[] = [];
  private readonly connWaiters: Array<(c: RawConnection) => void> = [];
  /** Answers stolen HTTP requests; unset: they wait (and time out on the agent). */
  httpHandler: HttpHandler | undefined;
  /** Bytes received on outgoing TCP streams, by id. */
  readonly tcpData = new Map<number, Buffer[]>();
  /** Stolen requests whose body is still streaming, by connection id. */
  private readonly streamedRequests = new Map<
    number,
    { req: MessageShape<typeof pb.HttpRequestSchema>; chunks: Buffer[] }
  >();

  private constructor(readonly session: RawSessionClient) {
    session.onRaw = (buf) => this.onFrame(buf);
  }

  static async connect(url: string, secret: string, opts: ConnectOptions = {}): Promise<AgentClient> {
    return new AgentClient(await RawSessionClient.connect(url, secret, opts));
  }

  get inbox() {
    return this.session.inbox;
  }

  private onFrame(buf: Buffer): void {
    const family = buf[0];
    const kind = buf[1];
    const id = buf.readUInt32BE(8);
    if (family === F.OUTGOING_TCP && kind === pb.OutgoingKind.DATA) {
      const list = this.tcpData.get(id) ?? [];
      list.push(Buffer.from(decodeStreamData(buf)));
      this.tcpData.set(id, list);
      return;
    }
    if (family !== F.TRAFFIC) return;
    if (kind === pb.TrafficKind.NEW_CONNECTION) {
      const c = new RawConnection(this, id, decodePayload(buf, pb.NewConnectionSchema));
      this.connections.set(id, c);
      this.announced.push(c);
      for (const w of this.connWaiters.splice(0)) w(c);
    } else if (kind === pb.TrafficKind.DATA) {
      const streaming = this.streamedRequests.get(id);
      if (streaming) streaming.chunks.push(Buffer.from(decodeStreamData(buf)));
      else this.connections.get(id)?.push(Buffer.from(decodeStreamData(buf)));
    } else if (kind === pb.TrafficKind.CLOSE) {
      this.streamedRequests.delete(id);
      const c = this.connections.get(id);
      this.connections.delete(id);
      c?.push(undefined, decodePayload(buf, pb.StreamCloseSchema).error);
    } else if (kind === pb.TrafficKind.HTTP_REQUEST && this.httpHandler) {
      const req = decodePayload(buf, pb.HttpRequestSchema);
      // A streamed body is collected whole before the handler runs.
      if (req.bodyStreamed) this.streamedRequests.set(id, { req, chunks: [] });
      else this.answer(id, req);
    } else if (kind === pb.TrafficKind.HTTP_REQUEST_END) {
      const streamed = this.streamedRequests.get(id);
      this.streamedRequests.delete(id);
      if (streamed) this.answer(id, { ...streamed.req, body: Buffer.concat(streamed.chunks) });
    }
  }

  /** Answers a stolen request with `httpHandler`'s whole answer. */
  private answer(id: number, req: MessageShape<typeof pb.HttpRequestSchema>): void {
    const answer = this.httpHandler!(req);
    this.session.send(
      encodeFrame(
        { family: F.TRAFFIC, kind: pb.TrafficKind.HTTP_RESPONSE, connectionId: id, requestId: id },
        pb.HttpResponseSchema,
        {
          status: answer.status,
          headers: Object.entries(answer.headers ?? {}).map(([name, value]) => ({ name, value })),
          body: typeof answer.body === "string" ? Buffer.from(answer.body) : (answer.body ?? Buffer.alloc(0)),
        },
      ),
    );
  }

  /** The next connection the agent announces (steal or mirror). */
  nextConnection(timeoutMs = 5000): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(
        () => reject(new Error(`no connection announced within ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.connWaiters.push((c) => {
        clearTimeout(t);
        resolve(c);
      });
    });
  }

  private static check(f: ReceivedFrame): ReceivedFrame {
    if (f.family === F.CONTROL && f.kind === pb.ControlKind.ERROR) {
      const e = f.as(pb.ProtocolErrorSchema);
      throw new AgentReplyError(e.code, e.message);
    }
    return f;
  }

  async env(
    get: {
      names?: string[];
      include?: string[];
      exclude?: string[];
      branch?: string;
      branchVariable?: string;
      /** Database branches: each rewrites one URL variable (database, user, password, host, port). */
      branches?: Array<{
        variable: string;
        database: string;
        user: string;
        password: string;
        host: string;
        port: number;
      }>;
    } = {},
  ) {
    const f = AgentClient.check(
      await this.session.request({ family: F.ENV, kind: pb.EnvKind.GET }, pb.EnvGetSchema, get, 20_000),
    );
    return f.as(pb.EnvResultSchema);
  }

  private async file<S extends Parameters<RawSessionClient["request"]>[1]>(
    kind: pb.FileKind,
    schema: S,
    init: Parameters<RawSessionClient["request"]>[2],
  ) {
    const f = AgentClient.check(
      await this.session.request({ family: F.FILE, kind }, schema, init as never, 20_000),
    );
    return f.as(pb.FileResultSchema);
  }

  open(path: string, write = false) {
    return this.file(pb.FileKind.OPEN, pb.FileOpenSchema, { path, write });
  }
  read(handle: bigint, offset: number, length: number) {
    return this.file(pb.FileKind.READ, pb.FileReadSchema, { handle, offset: BigInt(offset), length });
  }
  readDir(path: string) {
    return this.file(pb.FileKind.READ_DIR, pb.FileReadDirSchema, { path });
  }
  stat(path: string) {
    return this.file(pb.FileKind.STAT, pb.FileStatSchema, { path });
  }
  mounts() {
    return this.file(pb.FileKind.MOUNTS, pb.FileMountsSchema, {});
  }
  closeFile(handle: bigint) {
    return this.file(pb.FileKind.CLOSE, pb.FileCloseSchema, { handle });
  }

  /** Opens, reads in `chunk`-byte pieces to EOF, closes. */
  async readWholeFile(path: string, chunk = 3): Promise<Buffer> {
    const o = await this.open(path);
    if (o.result.case !== "handle") throw new AgentReplyError(o.error, o.message);
    const parts: Buffer[] = [];
    for (let off = 0; ;) {
      const r = await this.read(o.result.value, off, chunk);
      if (r.result.case !== "data") throw new AgentReplyError(r.error, r.message);
      if (r.result.value.length === 0) break;
      parts.push(Buffer.from(r.result.value));
      off += r.result.value.length;
    }
    await this.closeFile(o.result.value);
    return Buffer.concat(parts);
  }

  async dns(host: string, ipFamily = 0) {
    const f = AgentClient.check(
      await this.session.request({ family: F.DNS, kind: pb.DnsKind.GETADDRINFO }, pb.DnsGetAddrInfoSchema, {
        host,
        ipFamily,
      }),
    );
    return f.as(pb.DnsResultSchema);
  }

  async reverse(address: string) {
    const f = AgentClient.check(
      await this.session.request({ family: F.DNS, kind: pb.DnsKind.REVERSE }, pb.DnsReverseSchema, {
        address,
      }),
    );
    return f.as(pb.DnsResultSchema);
  }

  async tcpConnect(id: number, host: string, port: number) {
    const f = AgentClient.check(
      await this.session.request(
        { family: F.OUTGOING_TCP, kind: pb.OutgoingKind.CONNECT, connectionId: id },
        pb.TcpConnectSchema,
        { host, port },
      ),
    );
    return f.as(pb.ConnectResultSchema);
  }

  tcpSend(id: number, data: Buffer | string): void {
    this.session.send(
      encodeStreamData(
        F.OUTGOING_TCP,
        pb.OutgoingKind.DATA,
        id,
        typeof data === "string" ? Buffer.from(data) : data,
      ),
    );
  }

  tcpClose(id: number, error = ""): void {
    this.session.send(
      encodeFrame(
        { family: F.OUTGOING_TCP, kind: pb.OutgoingKind.CLOSE, connectionId: id },
        pb.StreamCloseSchema,
        { error },
      ),
    );
  }

  tcpReceived(id: number): Buffer {
    return Buffer.concat(this.tcpData.get(id) ?? []);
  }

  /** Waits for the agent's CLOSE on an outgoing TCP stream. */
  tcpClosed(id: number, timeoutMs = 5000) {
    return this.inbox.waitFor(
      (f) => f.family === F.OUTGOING_TCP && f.kind === pb.OutgoingKind.CLOSE && f.connectionId === id,
      timeoutMs,
      `close of TCP ${id}`,
    );
  }

  async udpBind(id: number, host = "", port = 0) {
    const f = AgentClient.check(
      await this.session.request(
        { family: F.OUTGOING_UDP, kind: pb.OutgoingKind.CONNECT, connectionId: id },
        pb.UdpBindSchema,
        { host, port },
      ),
    );
    return f.as(pb.ConnectResultSchema);
  }

  udpSend(id: number, data: Buffer | string, address = "", port = 0): void {
    this.session.send(
      encodeFrame(
        { family: F.OUTGOING_UDP, kind: pb.OutgoingKind.DATA, connectionId: id },
        pb.UdpDatagramSchema,
        {
          data: typeof data === "string" ? Buffer.from(data) : data,
          address,
          port,
        },
      ),
    );
  }

  async nextDatagram(id: number, timeoutMs = 5000) {
    const f = await this.inbox.waitFor(
      (x) => x.family === F.OUTGOING_UDP && x.kind === pb.OutgoingKind.DATA && x.connectionId === id,
      timeoutMs,
      `datagram on UDP ${id}`,
    );
    return f.as(pb.UdpDatagramSchema);
  }

  async subscribe(
    id: number,
    port: number,
    mode: "mirror" | "steal",
    httpFilter?: MessageInitShape<typeof pb.HttpFilterSchema>,
  ) {
    const kind = mode === "mirror" ? pb.SubscriptionKind.MIRROR : pb.SubscriptionKind.STEAL;
    const f = AgentClient.check(
      await this.session.request({ family: F.SUBSCRIPTION, kind, connectionId: id }, pb.SubscribeSchema, {
        port,
        ...(httpFilter ? { httpFilter } : {}),
      }),
    );
    return { ...f.as(pb.SubscriptionResultSchema), flags: f.flags };
  }

  async unsubscribe(id: number, port: number) {
    const f = AgentClient.check(
      await this.session.request(
        { family: F.SUBSCRIPTION, kind: pb.SubscriptionKind.UNSUBSCRIBE, connectionId: id },
        pb.UnsubscribeSchema,
        { port },
      ),
    );
    return f.as(pb.SubscriptionResultSchema);
  }

  async ping() {
    return AgentClient.check(await this.session.ping()).as(pb.PongSchema);
  }

  /** Sends Close (the agent releases the session; closing the socket is the client's job). */
  closeSession(reason = "done"): void {
    this.session.send(
      encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.CLOSE }, pb.CloseSchema, { reason }),
    );
  }

  close(): void {
    this.session.close();
  }
}
