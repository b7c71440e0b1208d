// Fuzz of the router's public session endpoint (data-plane/router) from both sides: the real
// router process in front of the real agent process ("east", which serves outgoing TCP to an
// echo server) and a hostile upstream ("fz", fuzz-upstream.ts). A client session ("victim")
// sends random bytes, text messages and valid frames of every catalogue entry with random
// payloads, broken by every mutation of frame-arbitraries.ts, in any order (before Hello,
// Hello twice, traffic on connections never opened); then fz sends the same kinds of input
// up the victim's link, as its Default upstream or not. Meanwhile a second client session
// ("bystander") on the same router pings and echoes data through east the whole time.
// For every input the sender gets the precise error (code, request id, a message naming the
// field) or close code of its verdict (frame-verdicts.ts);
// switchyard_router_bad_frames_total{source,code} moves by exactly what was answered or
// silently counted, and its labels stay within the error catalogue; the bystander never
// misses a round; the router never exits.
import { createServer, type AddressInfo, type Server } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorCode, isErrorCode } from "../../proto/error-codes.js";
import { encodeFrame, encodeRaw, HEADER_BYTES } from "../../proto/frame-codec.js";
import { negotiateVersion, PROTOCOL_VERSION_MAX, PROTOCOL_VERSION_MIN } from "../../proto/frame-version.js";
import * as pb from "../../proto/gen/session_pb.js";
import { hashSecret } from "../../proto/session-auth.js";
import { AgentProcess } from "../integration/agent/agent-process.js";
import { RouterProcess, type RouteSpec } from "../integration/router/router-process.js";
import { AgentClient } from "../peers/agent-client.js";
import type { ReceivedFrame } from "../peers/frame-inbox.js";
import { RawSessionClient } from "../peers/raw-session-client.js";
import { FUZZ_SEED, fuzzParameters } from "../support/fuzz-parameters.js";
import { describeInput, fuzzInputArb, MESSAGE_NAMES } from "./frame-arbitraries.js";
import { routerClientVerdict, routerUpstreamVerdict } from "./frame-verdicts.js";
import { FuzzUpstream } from "./fuzz-upstream.js";
import { CLOSE_1000, serverCloseCode, upgradeRaw, wsFrameArb } from "./raw-websocket.js";
import {
  BystanderTraffic,
  FIRST_LINE_CODES,
  labelValues,
  metricValue,
  Tally,
  throwInputs,
  vagueErrors,
} from "./session-fuzzing.js";

const CLIENT_SECRET = "fuzz-client-secret";
const AGENT_SECRET = "fuzz-agent-secret";
const MAX_PAYLOAD = 64 * 1024; // --max-payload-bytes: oversized frames stay cheap
const F = pb.FrameFamily;

let echo: Server;
let east: AgentProcess;
let fz: FuzzUpstream;
let router: RouterProcess;
let bystander: AgentClient;
let traffic: BystanderTraffic;

const badFrames = (page: string, source: string, code: string) =>
  metricValue(page, "switchyard_router_bad_frames_total", { source, code });

/**
 * Sends a ping with a request id no fuzzed frame uses and waits for its answer of `family`:
 * the merged pong (PING), or the router's refusal (CONTROL).
 */
async function pingFlush(
  client: RawSessionClient,
  requestId: number,
  family: number = F.PING,
): Promise<ReceivedFrame> {
  const reply = client.inbox.next(
    (f) => f.requestId === requestId && f.family === family,
    8000,
    `answer to ping ${requestId}`,
  );
  client.send(
    encodeFrame({ family: F.PING, kind: pb.PingKind.PING, requestId }, pb.PingSchema, { sentAtMicros: 1n }),
  );
  return reply;
}

beforeAll(async () => {
  echo = createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, "127.0.0.1", () => r()));
  // Outgoing sockets bound to loopback: a fuzzed CONNECT to a random host fails at once.
  east = await AgentProcess.start([
    "--secret-hash",
    hashSecret(AGENT_SECRET),
    "--outbound-bind",
    "127.0.0.1",
  ]);
  fz = new FuzzUpstream(AGENT_SECRET);
  await fz.start();
  const up = (cluster: "east" | "fz", id: string, isDefault: boolean) => ({
    cluster,
    url: cluster === "east" ? east.url(id) : fz.url(id),
    secret: AGENT_SECRET,
    isDefault,
  });
  const routes: RouteSpec[] = [
    {
      sessionId: "fuzz-victim",
      secret: CLIENT_SECRET,
      upstreams: [up("east", "fuzz-victim", true), up("fz", "fuzz-victim", false)],
    },
    {
      sessionId: "fuzz-victim-up",
      secret: CLIENT_SECRET,
      upstreams: [up("fz", "fuzz-victim-up", true), up("east", "fuzz-victim-up", false)],
    },
    { sessionId: "fuzz-raw", secret: CLIENT_SECRET, upstreams: [up("east", "fuzz-raw", true)] },
    { sessionId: "fuzz-bystander", secret: CLIENT_SECRET, upstreams: [up("east", "fuzz-bystander", true)] },
  ];
  router = await RouterProcess.start(routes, [
    "--max-payload-bytes",
    String(MAX_PAYLOAD),
    "--merge-timeout-ms",
    "500",
    "--log-level",
    "info",
  ]);
  bystander = await AgentClient.connect(router.sessionUrl("fuzz-bystander"), CLIENT_SECRET);
  await bystander.session.upstreamStatus("east", pb.UpstreamState.UP);
  await bystander.tcpConnect(1, "127.0.0.1", (echo.address() as AddressInfo).port);
  traffic = new BystanderTraffic(bystander, 1, ["east"]);
  traffic.start();
});

afterAll(async () => {
  await traffic?.stop();
  bystander?.close();
  await router?.stop();
  await fz?.stop();
  await east?.stop();
  await new Promise((r) => echo?.close(r));
});

describe(`router session endpoint under fuzzed frames (seed ${FUZZ_SEED})`, () => {
  it("answers every client input with its precise error or close, counts it, and leaves other sessions alone", async () => {
    const exact = [
      ...FIRST_LINE_CODES,
      ErrorCode.HELLO_REPEATED,
      ErrorCode.PEER_REPORTED_ERROR,
      ErrorCode.UNKNOWN_CONNECTION,
      ErrorCode.CONNECTION_ALREADY_CLOSED,
      ErrorCode.FRAME_BAD_PAYLOAD,
    ];
    const answered = new Tally();
    let inputs = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        fc.array(fuzzInputArb(), { minLength: 1, maxLength: 10 }),
        async (hello, batch) => {
          const before = await router.metrics();
          const victim = await RawSessionClient.connect(router.sessionUrl("fuzz-victim"), CLIENT_SECRET, {
            hello,
          });
          try {
            const state = { helloDone: hello };
            const { tally, closedWith } = await throwInputs(victim, batch, (input) => {
              const v = routerClientVerdict(input, {
                maxPayloadBytes: MAX_PAYLOAD,
                helloDone: state.helloDone,
              });
              if ("passes" in v && v.note === "hello") state.helloDone = true;
              return v;
            });
            if (closedWith === undefined) {
              // The flush gets its own verdict: a merged pong, or "say Hello first".
              const reply = await pingFlush(victim, 0x7ffffff0, state.helloDone ? F.PING : F.CONTROL);
              if (state.helloDone) expect(reply.kind).toBe(pb.PingKind.PONG);
              else {
                expect(reply.as(pb.ProtocolErrorSchema).code).toBe(ErrorCode.HELLO_REQUIRED);
                tally.add(ErrorCode.HELLO_REQUIRED);
              }
            }
            expect(vagueErrors(victim)).toEqual([]);
            const after = await router.metrics();
            for (const code of exact)
              expect(
                badFrames(after, "client", code) - badFrames(before, "client", code),
                `${code} counted`,
              ).toBe(tally.get(code));
            expect(traffic.failures).toEqual([]);
            inputs += batch.length;
            for (const [code, n] of tally.byCode) for (let i = 0; i < n; i++) answered.add(code);
          } finally {
            victim.close();
          }
        },
      ),
      fuzzParameters(250),
    );
    console.log(
      `router client fuzz: ${inputs} inputs; answered or counted`,
      Object.fromEntries(answered.byCode),
    );
  });

  it("acknowledges a Hello whose versions overlap and refuses any other (1002), counted", async () => {
    const version = fc.oneof(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 0xffffffff }));
    await fc.assert(
      fc.asyncProperty(version, version, async (minVersion, maxVersion) => {
        const before = await router.metrics();
        const victim = await RawSessionClient.connect(router.sessionUrl("fuzz-victim"), CLIENT_SECRET, {
          hello: false,
        });
        try {
          const reply = await victim.request(
            { family: F.CONTROL, kind: pb.ControlKind.HELLO },
            pb.HelloSchema,
            {
              minVersion,
              maxVersion,
            },
          );
          const ok = negotiateVersion(
            { min: PROTOCOL_VERSION_MIN, max: PROTOCOL_VERSION_MAX },
            { min: minVersion, max: maxVersion },
          );
          if (ok !== undefined) {
            expect(reply.kind).toBe(pb.ControlKind.HELLO_ACK);
            expect(reply.as(pb.HelloAckSchema).version).toBe(ok);
          } else {
            const e = reply.as(pb.ProtocolErrorSchema);
            expect(e.code).toBe(ErrorCode.PROTOCOL_VERSION_UNSUPPORTED);
            expect(e.message).toMatch(MESSAGE_NAMES[e.code]!);
            expect((await victim.waitClosed()).code).toBe(1002);
          }
          const code = ErrorCode.PROTOCOL_VERSION_UNSUPPORTED;
          const after = await router.metrics();
          expect(badFrames(after, "client", code) - badFrames(before, "client", code)).toBe(
            ok === undefined ? 1 : 0,
          );
        } finally {
          victim.close();
        }
      }),
      fuzzParameters(40),
    );
  });

  it("answers a frame over the payload limit, and closes (1009) one over four times the limit, counted", async () => {
    const before = await router.metrics();
    const victim = await RawSessionClient.connect(router.sessionUrl("fuzz-victim"), CLIENT_SECRET);
    try {
      const over = encodeRaw(
        { family: F.PING, kind: pb.PingKind.PING, requestId: 7 },
        Buffer.alloc(MAX_PAYLOAD + 1),
      );
      await throwInputs(victim, [{ text: false, bytes: over, mutation: "oversized" }], () => ({
        answer: ErrorCode.FRAME_OVERSIZED,
        requestId: 7,
      }));
      victim.ws.send(Buffer.alloc(4 * MAX_PAYLOAD + HEADER_BYTES + 1));
      expect((await victim.waitClosed()).code).toBe(1009);
      const after = await router.metrics();
      const code = ErrorCode.FRAME_OVERSIZED;
      expect(badFrames(after, "client", code) - badFrames(before, "client", code)).toBe(2);
      expect(traffic.failures).toEqual([]);
    } finally {
      victim.close();
    }
  });

  it("closes broken WebSocket framing from a client (1002) and counts it", async () => {
    const closes = new Map<number | undefined, number>();
    await fc.assert(
      fc.asyncProperty(wsFrameArb, async (frame) => {
        const before = await router.metrics();
        const socket = await upgradeRaw(router.sessionUrl("fuzz-raw"), CLIENT_SECRET);
        socket.write(Buffer.concat([frame.bytes, CLOSE_1000]));
        const code = await serverCloseCode(socket);
        closes.set(code, (closes.get(code) ?? 0) + 1);
        const after = await router.metrics();
        expect([1000, 1002], frame.describe).toContain(code);
        const bad = ErrorCode.FRAME_BAD_WEBSOCKET;
        expect(badFrames(after, "client", bad) - badFrames(before, "client", bad), frame.describe).toBe(
          code === 1002 ? 1 : 0,
        );
        expect(traffic.failures).toEqual([]);
      }),
      fuzzParameters(100),
    );
    expect(closes.get(1002)).toBeGreaterThan(0);
    console.log("router raw WebSocket frames: closes", Object.fromEntries(closes));
  });

  it("answers every upstream input with its precise error, counts it, and leaves other sessions alone", async () => {
    const exact = [
      ...FIRST_LINE_CODES,
      ErrorCode.FRAME_WRONG_UPSTREAM,
      ErrorCode.FRAME_BAD_PAYLOAD,
      ErrorCode.UNEXPECTED_REPLY,
      ErrorCode.CONNECTION_ID_IN_USE,
      ErrorCode.UNKNOWN_CONNECTION,
      ErrorCode.CONNECTION_ALREADY_CLOSED,
    ];
    const answered = new Tally();
    let inputs = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        fc.array(fuzzInputArb(), { minLength: 1, maxLength: 10 }),
        async (isDefault, batch) => {
          const before = await router.metrics();
          const session = isDefault ? "fuzz-victim-up" : "fuzz-victim";
          const victim = await RawSessionClient.connect(router.sessionUrl(session), CLIENT_SECRET);
          try {
            await victim.upstreamStatus("fz", pb.UpstreamState.UP);
            await victim.upstreamStatus("east", pb.UpstreamState.UP);
            const open = new Set<number>();
            const tally = new Tally();
            let linkFailed = false;
            for (const [i, input] of batch.entries()) {
              const v = routerUpstreamVerdict(input, { maxPayloadBytes: MAX_PAYLOAD, isDefault, open });
              const what = `upstream input #${i} ${describeInput(input)} (default: ${isDefault})`;
              const answer =
                "answer" in v
                  ? fz.inbox.next(
                      (f) =>
                        f.family === F.CONTROL &&
                        f.kind === pb.ControlKind.ERROR &&
                        f.requestId === v.requestId &&
                        f.as(pb.ProtocolErrorSchema).code === v.answer,
                      5000,
                      `${v.answer} (request ${v.requestId}) for ${what}`,
                    )
                  : undefined;
              fz.send(input.text ? input.string : input.bytes);
              if ("silent" in v) tally.add(v.silent);
              if ("answer" in v) {
                const e = (await answer!).as(pb.ProtocolErrorSchema);
                const names = MESSAGE_NAMES[v.answer];
                if (names) expect(e.message, what).toMatch(names);
                tally.add(v.answer);
              }
              if ("passes" in v && v.note === "link-fails") {
                linkFailed = true;
                break;
              }
            }
            // Flush: fz answers the ping after everything it sent before; a failed link is reported DOWN.
            if (linkFailed) await victim.upstreamStatus("fz", pb.UpstreamState.DOWN);
            else expect((await pingFlush(victim, 0x7ffffff0)).kind).toBe(pb.PingKind.PONG);
            const after = await router.metrics();
            for (const code of exact)
              expect(
                badFrames(after, "upstream", code) - badFrames(before, "upstream", code),
                `${code} counted`,
              ).toBe(tally.get(code));
            expect(traffic.failures).toEqual([]);
            inputs += batch.length;
            for (const [code, n] of tally.byCode) for (let i = 0; i < n; i++) answered.add(code);
          } finally {
            victim.close();
          }
        },
      ),
      fuzzParameters(200),
    );
    console.log(
      `router upstream fuzz: ${inputs} inputs; answered or counted`,
      Object.fromEntries(answered.byCode),
    );
  });

  it("kept the bystander served throughout, stayed up, and kept its counter labels bounded", async () => {
    expect(traffic.failures).toEqual([]);
    expect(traffic.rounds).toBeGreaterThan(100);
    expect(() => process.kill(router.pid, 0)).not.toThrow();
    const page = await router.metrics();
    for (const code of labelValues(page, "switchyard_router_bad_frames_total", "code"))
      expect(isErrorCode(code), `code label ${code}`).toBe(true);
    expect(labelValues(page, "switchyard_router_bad_frames_total", "source")).toEqual(["client", "upstream"]);
    console.log(`router bystander: ${traffic.rounds} rounds of ping + echo, no failure`);
  });
});
