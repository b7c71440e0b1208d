// Fuzz of the agent's session endpoint (data-plane/agent), the edge a router reaches: the
// real agent process, one session ("victim") sent random bytes, text messages and valid
// frames of every catalogue entry with random payloads, broken by every mutation of
// frame-arbitraries.ts and sent in any order (data before connect, close of what was never
// opened, Hello twice or never), while a second session ("bystander") on the same agent
// pings and echoes data through an outgoing TCP stream the whole time. For every input the
// victim gets the precise error (code, request id, a message naming the field) or close code
// of its verdict (frame-verdicts.ts); the agent's errors counter moves by exactly what was
// answered; the bystander never misses a round; the agent never exits.
import { createServer, type AddressInfo, type Server } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorCode } from "../../proto/error-codes.js";
import { encodeRaw, HEADER_BYTES } from "../../proto/frame-codec.js";
import * as pb from "../../proto/gen/session_pb.js";
import { hashSecret } from "../../proto/session-auth.js";
import { AgentProcess } from "../integration/agent/agent-process.js";
import { AgentClient } from "../peers/agent-client.js";
import { RawSessionClient } from "../peers/raw-session-client.js";
import { FUZZ_SEED, fuzzParameters } from "../support/fuzz-parameters.js";
import { fuzzInputArb } from "./frame-arbitraries.js";
import { CLOSE_1000, serverCloseCode, upgradeRaw, wsFrameArb } from "./raw-websocket.js";
import { agentVerdict, closedAgentVerdict } from "./frame-verdicts.js";
import {
  BystanderTraffic,
  FIRST_LINE_CODES,
  metricValue,
  Tally,
  throwInputs,
  vagueErrors,
} from "./session-fuzzing.js";

const SECRET = "fuzz-agent-secret";
const MAX_PAYLOAD = 1024 * 1024; // the agent's default
let agent: AgentProcess;
let echo: Server;
let echoPort = 0;
let bystander: AgentClient;
let traffic: BystanderTraffic;

const metrics = async () => (await fetch(`http://127.0.0.1:${agent.port}/metrics`)).text();
const errorsOf = (page: string, code: string) => metricValue(page, "switchyard_agent_errors_total", { code });

beforeAll(async () => {
  echo = createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, "127.0.0.1", () => r()));
  echoPort = (echo.address() as AddressInfo).port;
  // Outgoing sockets bound to loopback: a fuzzed CONNECT to a random host fails at once
  // instead of reaching out of this machine.
  agent = await AgentProcess.start(["--secret-hash", hashSecret(SECRET), "--outbound-bind", "127.0.0.1"]);
  bystander = await AgentClient.connect(agent.url("fuzz-bystander"), SECRET);
  await bystander.tcpConnect(1, "127.0.0.1", echoPort);
  traffic = new BystanderTraffic(bystander, 1);
  traffic.start();
});

afterAll(async () => {
  await traffic?.stop();
  bystander?.close();
  await agent?.stop();
  await new Promise((r) => echo?.close(r));
});

describe(`agent session endpoint under fuzzed frames (seed ${FUZZ_SEED})`, () => {
  it("answers every input with its precise error or close, counts it, and leaves other sessions alone", async () => {
    let batches = 0;
    let inputs = 0;
    const answered = new Tally();
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        fc.array(fuzzInputArb(), { minLength: 1, maxLength: 10 }),
        async (hello, batch) => {
          const before = await metrics();
          const victim = await RawSessionClient.connect(agent.url("fuzz-victim"), SECRET, { hello });
          try {
            const state = { helloDone: hello, ended: false };
            const { tally, closedWith } = await throwInputs(victim, batch, (input) => {
              if (state.ended) return closedAgentVerdict(input);
              const v = agentVerdict(input, { maxPayloadBytes: MAX_PAYLOAD, helloDone: state.helloDone });
              if ("passes" in v && v.note === "hello") state.helloDone = true;
              if ("passes" in v && v.note === "session-closed") state.ended = true;
              return v;
            });
            if (closedWith === undefined) {
              // A ping flushes the batch (frames are handled in order) and gets its own verdict.
              const ping = await victim.ping();
              if (state.ended || !state.helloDone) {
                const code = state.ended ? ErrorCode.SESSION_CLOSED : ErrorCode.HELLO_REQUIRED;
                expect(ping.as(pb.ProtocolErrorSchema).code).toBe(code);
                tally.add(code);
              } else expect(ping.kind).toBe(pb.PingKind.PONG);
            }
            expect(vagueErrors(victim)).toEqual([]);
            const after = await metrics();
            for (const code of [...FIRST_LINE_CODES, ErrorCode.SESSION_CLOSED])
              expect(errorsOf(after, code) - errorsOf(before, code), `${code} counted`).toBe(tally.get(code));
            expect(
              errorsOf(after, ErrorCode.FRAME_BAD_PAYLOAD) - errorsOf(before, ErrorCode.FRAME_BAD_PAYLOAD),
            ).toBeGreaterThanOrEqual(tally.get(ErrorCode.FRAME_BAD_PAYLOAD));
            expect(traffic.failures).toEqual([]);
            batches++;
            inputs += batch.length;
            for (const [code, n] of tally.byCode) for (let i = 0; i < n; i++) answered.add(code);
          } finally {
            victim.close();
          }
        },
      ),
      fuzzParameters(400),
    );
    expect((await fetch(`http://127.0.0.1:${agent.port}/healthz`)).status).toBe(200);
    expect(traffic.failures).toEqual([]);
    expect(traffic.rounds).toBeGreaterThan(batches);
    console.log(
      `agent fuzz: ${batches} batches, ${inputs} inputs, bystander ${traffic.rounds} rounds; answered`,
      Object.fromEntries(answered.byCode),
    );
  });

  it("answers a frame over the payload limit, and closes (1009) one over four times the limit, counted", async () => {
    const before = await metrics();
    const victim = await RawSessionClient.connect(agent.url("fuzz-victim"), SECRET);
    try {
      const over = encodeRaw(
        { family: pb.FrameFamily.PING, kind: pb.PingKind.PING, requestId: 7 },
        Buffer.alloc(MAX_PAYLOAD + 1),
      );
      const { tally } = await throwInputs(
        victim,
        [{ text: false, bytes: over, mutation: "oversized" }],
        () => ({
          answer: ErrorCode.FRAME_OVERSIZED,
          requestId: 7,
        }),
      );
      const huge = Buffer.alloc(4 * MAX_PAYLOAD + HEADER_BYTES + 1);
      victim.ws.send(huge);
      expect((await victim.waitClosed()).code).toBe(1009);
      const after = await metrics();
      expect(errorsOf(after, ErrorCode.FRAME_OVERSIZED) - errorsOf(before, ErrorCode.FRAME_OVERSIZED)).toBe(
        tally.get(ErrorCode.FRAME_OVERSIZED) + 1,
      );
      expect(traffic.failures).toEqual([]);
    } finally {
      victim.close();
    }
  });

  it("closes broken WebSocket framing (1002) or over-long messages (1009) and counts each", async () => {
    const closes = new Map<number | undefined, number>();
    await fc.assert(
      fc.asyncProperty(wsFrameArb, async (frame) => {
        const before = await metrics();
        const socket = await upgradeRaw(agent.url("fuzz-raw"), SECRET);
        socket.write(Buffer.concat([frame.bytes, CLOSE_1000]));
        const code = await serverCloseCode(socket);
        closes.set(code, (closes.get(code) ?? 0) + 1);
        const after = await metrics();
        const counted = (c: string) => errorsOf(after, c) - errorsOf(before, c);
        expect([1000, 1002, 1009], frame.describe).toContain(code);
        expect(counted(ErrorCode.FRAME_BAD_WEBSOCKET), frame.describe).toBe(code === 1002 ? 1 : 0);
        if (code === 1009) expect(counted(ErrorCode.FRAME_OVERSIZED), frame.describe).toBe(1);
        expect(traffic.failures).toEqual([]);
      }),
      fuzzParameters(200),
    );
    expect(closes.get(1002)).toBeGreaterThan(0);
    console.log("agent raw WebSocket frames: closes", Object.fromEntries(closes));
  });
});
