// Fuzz of what a control plane pushes to a router (data-plane/router's RouteDiscovery client
// and routing table): the real router process fed by a control plane that pushes anything
// (fuzz-control-plane.ts) — valid tables, full or delta, and tables with one defect
// (route-table-arbitraries.ts), pushes without a version or a nonce, and bytes that are not
// a DiscoveryResponse. For every push the router ACKs exactly the valid ones; a bad one is
// NACKed with an error naming the field, logged in a bounded line and counted
// (switchyard_router_events_total{event="routes_rejected"}), and the router keeps serving its
// last good table (/debug/routes) — while a client session on a session the pushes never
// touch pings and echoes data through its agent the whole time.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionRoute } from "../../proto/gen/grpc/switchyard/routes/v1/SessionRoute.js";
import type { DiscoveryResponse } from "../../proto/route-discovery-service.js";
import * as pb from "../../proto/gen/session_pb.js";
import { hashSecret } from "../../proto/session-auth.js";
import { RouterProcess } from "../integration/router/router-process.js";
import { AgentClient } from "../peers/agent-client.js";
import { ScriptedAgent } from "../peers/scripted-agent.js";
import { FUZZ_SEED, fuzzParameters } from "../support/fuzz-parameters.js";
import { FuzzControlPlane } from "./fuzz-control-plane.js";
import { PUSH_DEFECTS, routeCaseArb, validRoute, type RouteCase } from "./route-table-arbitraries.js";
import { BystanderTraffic, metricValue } from "./session-fuzzing.js";

const CLIENT_SECRET = "fuzz-client-secret";
let cp: FuzzControlPlane;
let agent: ScriptedAgent;
let router: RouterProcess;
let bystander: AgentClient;
let traffic: BystanderTraffic;
let lastGood = "";
let expected = new Set<string>();
let nonce = 0;

const bystanderRoute = (): SessionRoute => ({
  sessionId: "fuzz-bystander",
  clientKeyHash: hashSecret(CLIENT_SECRET),
  state: "SESSION_STATE_READY",
  upstreams: [{ cluster: "east", url: agent.url("fuzz-bystander"), secret: "agent", isDefault: true }],
});

async function table(): Promise<{ version: string; ids: string[] }> {
  const t = (await (await fetch(`${router.adminBase}/debug/routes`)).json()) as {
    version: string;
    sessions: Array<{ sessionId: string }>;
  };
  return { version: t.version, ids: t.sessions.map((s) => s.sessionId).sort() };
}

const rejected = async () =>
  metricValue(await router.metrics(), "switchyard_router_events_total", { event: "routes_rejected" });

beforeAll(async () => {
  cp = new FuzzControlPlane();
  const url = await cp.start();
  agent = new ScriptedAgent({ name: "east", secret: "agent", record: false });
  await agent.start();
  router = await RouterProcess.start(null, [
    "--control-plane",
    url,
    "--control-plane-plaintext",
    "--router-id",
    "fuzz-router",
    "--log-level",
    "info",
  ]);
  await cp.until(() => (cp.connected ? true : undefined), 15_000, "the router's stream");
  lastGood = "fz-0";
  const ack = await cp.push({
    versionInfo: lastGood,
    nonce: String(++nonce),
    fullSnapshot: true,
    upserts: [bystanderRoute(), validRoute("fuzz-other")],
  });
  expect(ack.errorDetail).toBeNull();
  expected = new Set(["fuzz-bystander", "fuzz-other"]);
  bystander = await AgentClient.connect(router.sessionUrl("fuzz-bystander"), CLIENT_SECRET);
  await bystander.session.upstreamStatus("east", pb.UpstreamState.UP);
  await bystander.tcpConnect(1, "127.0.0.1", 9);
  traffic = new BystanderTraffic(bystander, 1, ["east"]);
  traffic.start();
});

afterAll(async () => {
  await traffic?.stop();
  bystander?.close();
  await router?.stop();
  await agent?.stop();
  await cp?.stop();
});

describe(`router fed fuzzed routing tables (seed ${FUZZ_SEED})`, () => {
  it("ACKs valid pushes, NACKs each bad one naming the field (logged, counted), and keeps its last good table", async () => {
    let run = 0;
    const outcomes = new Map<string, number>();
    const pushArb = fc.record({
      full: fc.boolean(),
      count: fc.integer({ min: 0, max: 3 }),
      defect: fc.option(fc.constantFrom("route", "route", "route", ...Object.keys(PUSH_DEFECTS)), {
        freq: 3,
      }),
      removes: fc.array(fc.constantFrom("fuzz-r-1", "fuzz-other", "nope", "", " ", "x".repeat(400)), {
        maxLength: 3,
      }),
    });
    await fc.assert(
      fc.asyncProperty(
        pushArb.chain((p) =>
          fc
            .tuple(
              ...Array.from(
                { length: Math.max(p.count, p.defect === "route" || p.defect === "session-twice" ? 1 : 0) },
                (_, i) => routeCaseArb(`fuzz-r-${i}`, p.defect === "route" && i === 0),
              ),
            )
            .map((cases: RouteCase[]) => ({ ...p, cases })),
        ),
        async (p) => {
          run++;
          const version = p.defect === "no-version" ? "" : `fz-${run}`;
          const upserts = p.cases.map((c) => c.route);
          if (p.defect === "session-twice") upserts.push(validRoute(p.cases[0]!.route.sessionId!));
          if (p.full) upserts.push(bystanderRoute(), validRoute("fuzz-other"));
          const res: DiscoveryResponse = {
            versionInfo: version,
            nonce: p.defect === "no-nonce" ? "" : String(++nonce),
            fullSnapshot: p.full,
            upserts,
            removes: p.full ? [] : p.removes,
          };
          const names =
            p.defect === "route" ? p.cases[0]!.names : p.defect ? PUSH_DEFECTS[p.defect] : undefined;
          const what = `push ${run} (${p.defect === "route" ? p.cases[0]!.defect : (p.defect ?? "valid")})`;
          const before = await rejected();
          const answer = await cp.push(res);
          if (names === undefined) {
            expect(answer.errorDetail, `${what}: ${answer.errorDetail?.message}`).toBeNull();
            expect(answer.versionInfo).toBe(version);
            lastGood = version;
            if (p.full) expected = new Set(upserts.map((u) => u.sessionId!));
            else {
              for (const id of p.removes) expected.delete(id);
              for (const u of upserts) expected.add(u.sessionId!);
            }
            // The bystander's route is never removed: only fuzz-other and fuzz-r-* come and go.
            expected.add("fuzz-bystander");
          } else {
            expect(answer.errorDetail, `${what} was ACKed`).not.toBeNull();
            expect(answer.errorDetail!.message, what).toMatch(names);
            expect(answer.errorDetail!.message.length).toBeLessThanOrEqual(1024);
            expect(answer.versionInfo, `${what}: the NACK names the version still served`).toBe(lastGood);
            const line = await router.waitForLog(
              (l) =>
                l.msg === "routing push rejected (NACK)" && l.nonce === res.nonce && l.version === version,
            );
            expect(String(line.err).length, `${what}: log line`).toBeLessThanOrEqual(600);
          }
          expect(await rejected()).toBe(before + (names === undefined ? 0 : 1));
          const t = await table();
          expect(t.version).toBe(lastGood);
          expect(t.ids).toEqual([...expected].sort());
          expect(traffic.failures).toEqual([]);
          const key =
            names === undefined ? "ACK" : `NACK ${p.defect === "route" ? p.cases[0]!.defect : p.defect}`;
          outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
        },
      ),
      fuzzParameters(300),
    );
    console.log("route table fuzz: router answers", Object.fromEntries(outcomes));
  });

  it("survives bytes that are not a DiscoveryResponse: NACKs what decodes, else reopens its stream", async () => {
    const outcomes = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 48 }), async (bytes) => {
        const streams = cp.streams;
        const from = cp.requests.length;
        const before = await rejected();
        // A length-delimited field 2 running past the end: never a whole DiscoveryResponse,
        // though the decoder (lenient about wire types) may read the bytes before it as one.
        cp.pushRaw(Buffer.concat([Buffer.from(bytes), Buffer.from([0x12, 0xff, 0xff, 0x03])]));
        const answer = await cp.until(
          () =>
            cp.streams > streams
              ? cp.requests.slice(from).find((r) => r.routerId === "fuzz-router")
              : cp.requests.slice(from).find((r) => r.errorDetail !== null || r.responseNonce !== ""),
          15_000,
          "a NACK or the router's new stream",
        );
        if (answer.routerId === "fuzz-router") {
          // A new stream says which version the router still serves.
          expect(answer.versionInfo).toBe(lastGood);
          outcomes.set("reconnected", (outcomes.get("reconnected") ?? 0) + 1);
          // An answered push resets the router's reconnect backoff (an empty delta changes nothing).
          const ack = await cp.push({ versionInfo: lastGood, nonce: String(++nonce), fullSnapshot: false });
          expect(ack.errorDetail).toBeNull();
        } else {
          expect(answer.errorDetail, "garbage was ACKed").not.toBeNull();
          expect(answer.versionInfo).toBe(lastGood);
          expect(await rejected()).toBe(before + 1);
          outcomes.set("NACK", (outcomes.get("NACK") ?? 0) + 1);
        }
        const t = await table();
        expect(t.version).toBe(lastGood);
        expect(t.ids).toEqual([...expected].sort());
        expect(traffic.failures).toEqual([]);
      }),
      fuzzParameters(20),
    );
    console.log("route table fuzz: garbage pushes", Object.fromEntries(outcomes));
  });

  it("kept the bystander served throughout", () => {
    expect(traffic.failures).toEqual([]);
    expect(traffic.rounds).toBeGreaterThan(20);
    console.log(`route table fuzz: bystander ${traffic.rounds} rounds of ping + echo, no failure`);
  });
});
