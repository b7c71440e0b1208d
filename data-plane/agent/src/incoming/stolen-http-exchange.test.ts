// Stolen HTTP requests with streamed bodies, through a real AgentServer on loopback and a
// raw session client: request bodies of any size leave as DATA frames under the frame limit,
// answers reach the caller chunk by chunk (an event stream's events arrive before its end),
// either side can cut the exchange, the answer's deadline starts after the upload, and a slow
// caller or a slow session holds the other side back instead of filling the agent's memory.
import { createHash } from "node:crypto";
import { request, type ClientRequest, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { createServer } from "node:http";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { encodeFrame } from "../../../../proto/frame-codec.js";
import * as pb from "../../../../proto/gen/session_pb.js";
import { hashSecret } from "../../../../proto/session-auth.js";
import { decodeStreamData, encodeStreamData } from "../../../../proto/stream-data-frame.js";
import { AgentClient } from "../../../../test/peers/agent-client.js";
import type { ReceivedFrame } from "../../../../test/peers/frame-inbox.js";
import { AgentServer, type AgentServerOptions } from "../agent-server.js";
import { SessionSecrets } from "../session-secrets.js";
import { TargetView } from "../target/target-view.js";

const SECRET = "exchange-secret";
const F = pb.FrameFamily.TRAFFIC;
const K = pb.TrafficKind;
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** An agent whose port steals every request (method filter on each test's method). */
async function stealing(method: string, extra: Partial<AgentServerOptions> = {}) {
  const app = createServer((_req, res) => res.end("app"));
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", () => r()));
  cleanups.push(() => new Promise((r) => app.close(r)));
  const appPort = (app.address() as AddressInfo).port;
  const agent = new AgentServer({
    host: "127.0.0.1",
    port: 0,
    secrets: new SessionSecrets({ secretHashes: [hashSecret(SECRET)] }),
    view: new TargetView(undefined, undefined),
    ports: [{ appPort, listenPort: 0 }],
    logger: pino({ level: "silent" }),
    ...extra,
  });
  await agent.listen();
  cleanups.push(() => agent.close());
  const c = await AgentClient.connect(agent.url("s1"), SECRET);
  cleanups.push(() => c.close());
  expect((await c.subscribe(1, appPort, "steal", { filter: { case: "method", value: method } })).ok).toBe(
    true,
  );
  return { agent, c, traffic: agent.trafficPorts.get(appPort)! };
}

/** A caller's request; resolves with the response as soon as its head arrived. */
function call(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
): { req: ClientRequest; res: Promise<IncomingMessage> } {
  let req!: ClientRequest;
  const res = new Promise<IncomingMessage>((resolve, reject) => {
    req = request({ host: "127.0.0.1", port, method, path, headers, agent: false }, resolve);
    req.on("error", reject);
  });
  return { req, res };
}

function readAll(res: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.on("end", () => resolve(Buffer.concat(chunks)));
    res.on("error", reject);
  });
}

const frameOf = (kind: number, id: number) => (f: ReceivedFrame) =>
  f.family === F && f.kind === kind && f.connectionId === id;

function respond(c: AgentClient, id: number, init: { status: number; streamed?: boolean; body?: string }) {
  c.session.send(
    encodeFrame(
      { family: F, kind: K.HTTP_RESPONSE, connectionId: id, requestId: id },
      pb.HttpResponseSchema,
      {
        status: init.status,
        headers: [{ name: "content-type", value: "text/event-stream" }],
        body: Buffer.from(init.body ?? ""),
        bodyStreamed: init.streamed ?? false,
      },
    ),
  );
}
const sendData = (c: AgentClient, id: number, data: Buffer | string) =>
  c.session.send(encodeStreamData(F, K.DATA, id, Buffer.from(data)));
const sendEnd = (c: AgentClient, id: number) =>
  c.session.send(
    encodeFrame({ family: F, kind: K.HTTP_RESPONSE_END, connectionId: id }, pb.HttpBodyEndSchema, {}),
  );

describe("stolen HTTP bodies stream both ways", () => {
  it("sends a large request body as DATA frames under the frame limit, ended by HTTP_REQUEST_END", async () => {
    const { c, traffic } = await stealing("POST");
    const body = Buffer.alloc(3 * 1024 * 1024 + 17);
    for (let i = 0; i < body.length; i++) body[i] = (i * 7) & 0xff;
    const { req, res } = call(traffic, "POST", "/upload", { "content-length": String(body.length) });
    req.end(body);
    const head = await c.inbox.waitFor((f) => f.family === F && f.kind === K.HTTP_REQUEST, 5000);
    const id = head.connectionId;
    const r = head.as(pb.HttpRequestSchema);
    expect(r).toMatchObject({ method: "POST", path: "/upload", bodyStreamed: true });
    expect(r.body.length).toBe(0);
    await c.inbox.waitFor(frameOf(K.HTTP_REQUEST_END, id), 10_000);
    const parts = c.inbox.all.filter(frameOf(K.DATA, id)).map((f) => decodeStreamData(f.raw));
    expect(Math.max(...parts.map((p) => p.length))).toBeLessThanOrEqual(256 * 1024);
    const got = Buffer.concat(parts);
    expect(createHash("sha256").update(got).digest("hex")).toBe(
      createHash("sha256").update(body).digest("hex"),
    );
    respond(c, id, { status: 201, body: "stored" });
    const answer = await res;
    expect(answer.statusCode).toBe(201);
    expect((await readAll(answer)).toString()).toBe("stored");
    const close = await c.inbox.waitFor(frameOf(K.CLOSE, id));
    expect(close.as(pb.StreamCloseSchema).error).toBe("");
  });

  it("keeps a small body with a length inside the request frame", async () => {
    const { c, traffic } = await stealing("PUT");
    const { req, res } = call(traffic, "PUT", "/small", { "content-length": "5" });
    req.end("hello");
    const head = await c.inbox.waitFor((f) => f.family === F && f.kind === K.HTTP_REQUEST);
    const r = head.as(pb.HttpRequestSchema);
    expect(r.bodyStreamed).toBe(false);
    expect(Buffer.from(r.body).toString()).toBe("hello");
    respond(c, head.connectionId, { status: 200, body: "ok" });
    expect((await readAll(await res)).toString()).toBe("ok");
  });

  it("writes a streamed answer's head at once and each chunk as it comes, until HTTP_RESPONSE_END", async () => {
    const { c, traffic } = await stealing("GET");
    const { req, res } = call(traffic, "GET", "/events");
    req.end();
    const head = await c.inbox.waitFor((f) => f.family === F && f.kind === K.HTTP_REQUEST);
    const id = head.connectionId;
    respond(c, id, { status: 200, streamed: true });
    const answer = await res; // the head arrived before any event
    expect(answer.headers["content-type"]).toBe("text/event-stream");
    expect(answer.headers["transfer-encoding"]).toBe("chunked");
    const chunks: string[] = [];
    answer.on("data", (d: Buffer) => chunks.push(d.toString()));
    const ended = new Promise((r) => answer.on("end", r));
    sendData(c, id, "data: 1\n\n");
    await expect.poll(() => chunks.join("")).toBe("data: 1\n\n");
    sendData(c, id, "data: 2\n\n");
    await expect.poll(() => chunks.join("")).toBe("data: 1\n\ndata: 2\n\n");
    expect(c.inbox.all.some(frameOf(K.CLOSE, id))).toBe(false);
    sendEnd(c, id);
    await ended;
    expect((await c.inbox.waitFor(frameOf(K.CLOSE, id))).as(pb.StreamCloseSchema).error).toBe("");
  });

  it("tells the client when the caller leaves mid-answer, and cuts the caller when the client ends with an error", async () => {
    const { c, traffic } = await stealing("GET");
    const first = call(traffic, "GET", "/leaving");
    first.req.end();
    const head1 = await c.inbox.waitFor((f) => f.family === F && f.kind === K.HTTP_REQUEST);
    respond(c, head1.connectionId, { status: 200, streamed: true });
    (await first.res).destroy();
    const gone = await c.inbox.waitFor(frameOf(K.CLOSE, head1.connectionId));
    expect(gone.as(pb.StreamCloseSchema).error).toBe("the caller closed its connection");

    const second = call(traffic, "GET", "/cut");
    second.req.end();
    const head2 = await c.inbox.waitFor(
      (f) => f.family === F && f.kind === K.HTTP_REQUEST && f.connectionId !== head1.connectionId,
    );
    respond(c, head2.connectionId, { status: 200, streamed: true });
    const answer = await second.res;
    sendData(c, head2.connectionId, "partial");
    c.session.send(
      encodeFrame({ family: F, kind: K.CLOSE, connectionId: head2.connectionId }, pb.StreamCloseSchema, {
        error: "the local process broke off",
      }),
    );
    const outcome = await new Promise<string>((resolve) => {
      answer.on("end", () => resolve("ended"));
      answer.on("error", () => resolve("cut"));
      answer.on("aborted", () => resolve("cut"));
      answer.resume();
    });
    expect(outcome).toBe("cut");
  });

  it("starts the answer's deadline after the upload: a slow upload is answered, silence after it is a 502", async () => {
    const { c, traffic } = await stealing("POST", { stolenRequestTimeoutMs: 300, sweepIntervalMs: 50 });
    const slow = call(traffic, "POST", "/slow");
    slow.req.write("part one, ");
    const head = await c.inbox.waitFor((f) => f.family === F && f.kind === K.HTTP_REQUEST);
    await new Promise((r) => setTimeout(r, 700)); // longer than the deadline
    slow.req.end("part two");
    await c.inbox.waitFor(frameOf(K.HTTP_REQUEST_END, head.connectionId));
    respond(c, head.connectionId, { status: 200, body: "worth the wait" });
    expect((await readAll(await slow.res)).toString()).toBe("worth the wait");

    const silent = call(traffic, "POST", "/silent", { "content-length": "0" });
    silent.req.end();
    const t0 = Date.now();
    const answer = await silent.res;
    expect(answer.statusCode).toBe(502);
    expect((await readAll(answer)).toString()).toContain("no answer within 300 ms");
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it("stops reading the session while the caller does not take the answer, instead of buffering it", async () => {
    const { agent, c, traffic } = await stealing("GET");
    const { req, res } = call(traffic, "GET", "/download");
    req.end();
    const head = await c.inbox.waitFor((f) => f.family === F && f.kind === K.HTTP_REQUEST);
    const id = head.connectionId;
    respond(c, id, { status: 200, streamed: true });
    const answer = await res;
    answer.pause(); // a caller that does not read (yet)
    const total = 32 * 1024 * 1024;
    const block = Buffer.alloc(256 * 1024, 3);
    for (let sent = 0; sent < total; sent += block.length) sendData(c, id, block);
    sendEnd(c, id);
    const session = agent.sessions.get("s1")!;
    await expect.poll(() => session.flow.readingBlocked, { timeout: 10_000, interval: 10 }).toBe(true);
    // The rest waits in the client's own queue, not in the agent.
    expect(c.session.ws.bufferedAmount).toBeGreaterThan(0);
    const got = readAll(answer);
    answer.resume();
    expect((await got).length).toBe(total);
  });

  it("pauses the caller's upload while the session does not read, instead of buffering it", async () => {
    const { agent, c, traffic } = await stealing("POST");
    const total = 16 * 1024 * 1024;
    const { req, res } = call(traffic, "POST", "/big", { "content-length": String(total) });
    const head = c.inbox.waitFor((f) => f.family === F && f.kind === K.HTTP_REQUEST);
    req.flushHeaders();
    const id = (await head).connectionId;
    c.session.ws.pause(); // a session that does not read (yet)
    const block = Buffer.alloc(64 * 1024, 5);
    let written = 0;
    let blocked = false;
    const pump = () => {
      while (written < total) {
        written += block.length;
        if (!req.write(block)) {
          blocked = true;
          req.once("drain", () => {
            blocked = false;
            pump();
          });
          return;
        }
      }
      req.end();
    };
    pump();
    const session = agent.sessions.get("s1")!;
    await expect
      .poll(() => agent.metrics.counters.backpressurePauses > 0 && blocked, { timeout: 10_000, interval: 20 })
      .toBe(true);
    expect(written).toBeLessThan(total);
    expect(session.flow.maxBufferedBytes).toBeLessThan(1024 * 1024 + 512 * 1024);
    c.session.ws.resume();
    await c.inbox.waitFor(frameOf(K.HTTP_REQUEST_END, id), 20_000);
    const received = c.inbox.all
      .filter(frameOf(K.DATA, id))
      .reduce((n, f) => n + decodeStreamData(f.raw).length, 0);
    expect(received).toBe(total);
    expect(session.flow.maxBufferedBytes).toBeLessThan(1024 * 1024 + 512 * 1024);
    respond(c, id, { status: 204 });
    expect((await res).statusCode).toBe(204);
  });
});
