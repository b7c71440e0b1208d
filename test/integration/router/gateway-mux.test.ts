// The multiplexed hop between a Primary router and a member gateway router, with real
// router processes: every session to one gateway rides one connection (the routers'
// metrics count connections and channels on both sides), a session that stops reading
// stalls neither the connection nor another session on it, and `--no-upstream-mux` dials
// per session as before.
import { afterEach, describe, expect, it, vi } from "vitest";
import { encodeFrame } from "../../../proto/frame-codec.js";
import * as pb from "../../../proto/gen/session_pb.js";
import { RawSessionClient } from "../../peers/raw-session-client.js";
import { ScriptedAgent } from "../../peers/scripted-agent.js";
import { RouterProcess, type RouteSpec } from "./router-process.js";

const F = pb.FrameFamily;
const SECRET = "mux-secret";
const HIGH = 256 * 1024;
const HARD = 4 * 1024 * 1024;
const flowArgs = ["--high-water-bytes", String(HIGH), "--hard-limit-bytes", String(HARD)];

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function agent(name: string): Promise<ScriptedAgent> {
  const a = new ScriptedAgent({ name, secret: `agent-${name}` });
  await a.start();
  cleanup.push(() => a.stop());
  return a;
}

async function router(routes: RouteSpec[], args: string[] = []): Promise<RouterProcess> {
  const r = await RouterProcess.start(routes, args);
  cleanup.push(() => r.stop());
  return r;
}

/**
 * `n` sessions `s1`…`sn`, each with an agent of its own behind one gateway, and a Primary
 * whose sessions `p1`…`pn` have that gateway as their only upstream.
 */
async function stack(n: number, primaryArgs: string[] = [], args: string[] = []) {
  const agents: ScriptedAgent[] = [];
  for (let i = 1; i <= n; i++) agents.push(await agent(`pod-${i}`));
  const gateway = await router(
    agents.map((a, i) => ({
      sessionId: `c${i + 1}`,
      secret: `child-${i + 1}`,
      upstreams: [
        { cluster: `pod-${i + 1}`, url: a.url(`c${i + 1}`), secret: `agent-pod-${i + 1}`, isDefault: true },
      ],
    })),
    args,
  );
  const primary = await router(
    agents.map((_, i) => ({
      sessionId: `p${i + 1}`,
      secret: SECRET,
      upstreams: [
        {
          cluster: "east",
          url: gateway.sessionUrl(`c${i + 1}`),
          secret: `child-${i + 1}`,
          isDefault: true,
          mux: true,
        },
      ],
    })),
    [...args, ...primaryArgs],
  );
  const clients: RawSessionClient[] = [];
  for (let i = 1; i <= n; i++) {
    const c = await RawSessionClient.connect(primary.sessionUrl(`p${i}`), SECRET);
    cleanup.push(() => c.close());
    await c.upstreamStatus("east", pb.UpstreamState.UP);
    clients.push(c);
  }
  return { agents, gateway, primary, clients };
}

describe("multiplexed gateway connection", () => {
  it("carries every session to one gateway on one connection, counted on both routers", async () => {
    const s = await stack(4);
    for (const c of s.clients) expect((await c.ping()).as(pb.PongSchema).clusters[0]!.cluster).toBe("east");
    const env = await s.clients[2]!.request({ family: F.ENV, kind: pb.EnvKind.GET }, pb.EnvGetSchema, {});
    expect(env.as(pb.EnvResultSchema).vars.AGENT_NAME).toBe("pod-3");

    expect(await s.primary.metric("switchyard_router_mux_connections", { side: "dialled" })).toBe(1);
    expect(await s.primary.metric("switchyard_router_mux_channels", { side: "dialled" })).toBe(4);
    expect(await s.gateway.metric("switchyard_router_mux_connections", { side: "accepted" })).toBe(1);
    expect(await s.gateway.metric("switchyard_router_mux_channels", { side: "accepted" })).toBe(4);
    const debug = (await (await fetch(`http://127.0.0.1:${s.primary.adminPort}/debug/routes`)).json()) as {
      attached: { upstreams: { multiplexed: boolean }[] }[];
    };
    expect(debug.attached.flatMap((a) => a.upstreams.map((u) => u.multiplexed))).toEqual([
      true,
      true,
      true,
      true,
    ]);

    // A session that ends leaves the connection to the others.
    await s.clients[0]!.close();
    await vi.waitFor(
      async () =>
        expect(await s.gateway.metric("switchyard_router_mux_channels", { side: "accepted" })).toBe(3),
      { timeout: 10_000, interval: 100 },
    );
    expect((await s.clients[1]!.ping()).as(pb.PongSchema).clusters).toHaveLength(1);
  });

  it("dials a WebSocket per session with --no-upstream-mux", async () => {
    const s = await stack(2, ["--no-upstream-mux"]);
    for (const c of s.clients) expect((await c.ping()).as(pb.PongSchema).clusters).toHaveLength(1);
    expect(await s.primary.metric("switchyard_router_mux_connections", { side: "dialled" })).toBe(0);
    expect(await s.gateway.metric("switchyard_router_mux_connections", { side: "accepted" })).toBe(0);
  });

  it("holds back only the session whose client stops reading; its bytes all arrive once it reads", async () => {
    const s = await stack(2, [], flowArgs);
    const [slow, fast] = s.clients as [RawSessionClient, RawSessionClient];
    const announced = slow.inbox.next(
      (f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.NEW_CONNECTION,
    );
    const agentConn = s.agents[0]!.emitConnection({ port: 8080 });
    const id = (await announced).connectionId;
    let received = 0;
    slow.onRaw = (buf) => {
      if (buf[0] === F.TRAFFIC && buf[1] === pb.TrafficKind.DATA && buf.readUInt32BE(8) === id)
        received += buf.length;
    };
    slow.ws.pause();
    const chunk = Buffer.alloc(64 * 1024, 7);
    const frames = 512; // 32 MiB: far more than the socket buffers and the channel's window
    for (let i = 0; i < frames; i++) s.agents[0]!.emitData(agentConn, chunk);

    // The Primary stops crediting the channel; the gateway then stops reading that agent.
    await vi.waitFor(
      async () =>
        expect(
          await s.gateway.metric("switchyard_router_events_total", { event: "backpressure_pause_upstream" }),
        ).toBeGreaterThan(0),
      { timeout: 15_000, interval: 100 },
    );
    expect(await s.primary.metric("switchyard_router_buffered_bytes", { side: "client" })).toBeLessThan(HARD);
    expect(await s.gateway.metric("switchyard_router_buffered_bytes", { side: "client" })).toBeLessThan(HARD);
    expect(received).toBe(0);
    // The other session on the same connection answers at once, again and again.
    for (let i = 0; i < 20; i++) expect((await fast.ping()).as(pb.PongSchema).clusters).toHaveLength(1);
    expect(await s.primary.metric("switchyard_router_mux_connections", { side: "dialled" })).toBe(1);

    slow.ws.resume();
    const total =
      frames *
      encodeFrame({ family: F.TRAFFIC, kind: pb.TrafficKind.DATA, connectionId: id }, pb.StreamDataSchema, {
        data: chunk,
      }).length;
    await vi.waitFor(() => expect(received).toBe(total), { timeout: 30_000, interval: 100 });
  });
});
