// Random and mutated frames thrown at a live router process from both sides (fast-check).
// Properties after every batch: the router process is alive, the fuzzed session still
// answers a ping, a bystander session on the same router is unaffected, and every
// rejected frame was counted.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import * as pb from "../../../proto/gen/session_pb.js";
import { catalogEntries } from "../../../proto/frame-catalog.js";
import { encodeRaw } from "../../../proto/frame-codec.js";
import { ScriptedAgent } from "../../peers/scripted-agent.js";
import { RawSessionClient } from "../../peers/raw-session-client.js";
import { RouterProcess, type RouteSpec } from "./router-process.js";

const SECRET = "fuzz-secret";
let router: RouterProcess;
const agents: ScriptedAgent[] = [];
let victim: RawSessionClient;
let bystander: RawSessionClient;

function route(id: string, as: ScriptedAgent[]): RouteSpec {
  return {
    sessionId: id,
    secret: SECRET,
    upstreams: as.map((a, i) => ({ cluster: a.opts.name, url: a.url(id), secret: "a", isDefault: i === 0 })),
  };
}

/** Frames: pure noise, or a header with any family/kind/flags/ids and a random payload and length field. */
const frameArb = fc.oneof(
  fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b)),
  fc
    .record({
      entry: fc.constantFrom(...catalogEntries()),
      family: fc.option(fc.integer({ min: 0, max: 255 }), { freq: 4 }),
      kind: fc.option(fc.integer({ min: 0, max: 255 }), { freq: 4 }),
      flags: fc.constantFrom(0, 0, 1, 2, 0x80),
      requestId: fc.integer({ min: 1_000_000, max: 2_000_000 }),
      connectionId: fc.oneof(fc.constantFrom(0, 1, 2, 3), fc.integer({ min: 0, max: 0xffffffff })),
      payload: fc.uint8Array({ maxLength: 200 }),
      lengthDelta: fc.constantFrom(0, 0, 0, 1, -1, 1000),
    })
    .map((r) => {
      const buf = encodeRaw(
        {
          family: r.family ?? r.entry[0],
          kind: r.kind ?? r.entry[1],
          flags: r.flags,
          requestId: r.requestId,
          connectionId: r.connectionId,
        },
        r.payload,
      );
      if (r.lengthDelta !== 0) buf.writeUInt32BE(Math.max(0, r.payload.length + r.lengthDelta), 12);
      return buf;
    }),
);

beforeAll(async () => {
  for (const name of ["east", "west", "north", "b-east"]) {
    const a = new ScriptedAgent({ name, secret: "a", record: false });
    await a.start();
    agents.push(a);
  }
  router = await RouterProcess.start(
    [route("mc-victim", agents.slice(0, 3)), route("mc-bystander", agents.slice(3))],
    ["--merge-timeout-ms", "500", "--log-level", "info"],
  );
  victim = await RawSessionClient.connect(router.sessionUrl("mc-victim"), SECRET, { record: true });
  bystander = await RawSessionClient.connect(router.sessionUrl("mc-bystander"), SECRET);
  for (const c of ["east", "west", "north"]) await victim.upstreamStatus(c, pb.UpstreamState.UP);
  await bystander.upstreamStatus("b-east", pb.UpstreamState.UP);
});

afterAll(async () => {
  victim?.close();
  bystander?.close();
  await router?.stop();
  for (const a of agents) await a.stop();
});

describe("frames thrown at a live router", () => {
  it("never crashes it, never leaks into another session, and counts what it rejects", async () => {
    const bystanderFrames = () => bystander.inbox.all.length;
    await fc.assert(
      fc.asyncProperty(
        fc.array(frameArb, { maxLength: 12 }),
        fc.array(frameArb, { maxLength: 6 }),
        async (fromClient, fromAgent) => {
          const seen = bystanderFrames();
          for (const f of fromClient) victim.send(f);
          // A frame that breaks the protocol makes the router drop and redial the link;
          // frames are thrown once it is back.
          await vi.waitFor(() => expect(agents[1]!.connected).toBe(true), { timeout: 10_000 });
          for (const f of fromAgent) if (agents[1]!.connected) agents[1]!.emitRaw(f);
          const pong = await victim.ping(5000);
          expect(pong.kind).toBe(pb.PingKind.PONG);
          expect(victim.closed).toBeUndefined();
          // The bystander received nothing it did not ask for.
          expect(bystanderFrames()).toBe(seen);
          expect((await bystander.ping()).kind).toBe(pb.PingKind.PONG);
          expect(() => process.kill(router.pid, 0)).not.toThrow();
        },
      ),
      { numRuns: 60 },
    );
    expect(await router.metric("switchyard_router_bad_frames_total", { source: "client" })).toBeGreaterThan(
      0,
    );
    expect(await router.metric("switchyard_router_bad_frames_total", { source: "upstream" })).toBeGreaterThan(
      0,
    );
  });
});
