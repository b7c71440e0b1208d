// The router process fed by the real RouteDiscovery server (control-plane side) over
// gRPC with mutual TLS: it becomes ready with the pushed table, serves a session,
// reports the session live, drops the client when the control plane removes the
// session, and keeps serving its last good table while the control plane is gone.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  RouteDiscoveryServer,
  RouteDiscoveryStreamServer,
  RouteSnapshotCache,
  RouterAuthenticator,
} from "../../../control-plane/src/route-discovery/index.js";
import { SessionRouteSchema, SessionState } from "../../../proto/gen/route_discovery_pb.js";
import * as pb from "../../../proto/gen/session_pb.js";
import { hashSecret } from "../../../proto/session-auth.js";
import { ScriptedAgent } from "../../peers/scripted-agent.js";
import { RawSessionClient } from "../../peers/raw-session-client.js";
import { createCertificateAuthority } from "../../env/index.js";
import { RouterProcess } from "./router-process.js";

let dir: string;
let agent: ScriptedAgent;
let cache: RouteSnapshotCache;
let streams: RouteDiscoveryStreamServer;
let server: RouteDiscoveryServer | undefined;
let router: RouterProcess;
const live: string[][] = [];

const route = (id: string) =>
  create(SessionRouteSchema, {
    sessionId: id,
    clientKeyHash: hashSecret("client"),
    state: SessionState.READY,
    upstreams: [{ cluster: "east", url: agent.url(id), secret: "agent", isDefault: true }],
  });

beforeAll(async () => {
  const ca = await createCertificateAuthority("switchyard-cp-ca");
  const serverCert = await ca.issue({
    commonName: "control-plane",
    ipAddresses: ["127.0.0.1"],
    usage: "server",
  });
  const routerCert = await ca.issue({ commonName: "router-mtls", usage: "client" });
  dir = mkdtempSync(join(tmpdir(), "switchyard-cp-"));
  for (const [name, pem] of Object.entries({
    "ca.crt": ca.certPem,
    "tls.crt": routerCert.certPem,
    "tls.key": routerCert.keyPem,
  }))
    writeFileSync(join(dir, name), pem);

  agent = new ScriptedAgent({ name: "east", secret: "agent" });
  await agent.start();
  cache = new RouteSnapshotCache({ ready: true });
  cache.replaceAll([route("mc-cp-a"), route("mc-cp-b")]);
  streams = new RouteDiscoveryStreamServer({
    cache,
    authenticator: new RouterAuthenticator({ clientCertificate: { allowedCommonNames: ["router-mtls"] } }),
  });
  streams.onLiveSessions((r) => live.push([...r.sessionIds]));
  server = new RouteDiscoveryServer({
    streams,
    host: "127.0.0.1",
    port: 0,
    tls: { certPem: serverCert.certPem, keyPem: serverCert.keyPem, clientCaPem: ca.certPem },
  });
  const { url } = await server.listen();
  router = await RouterProcess.start(null, [
    "--control-plane",
    url,
    "--control-plane-ca",
    join(dir, "ca.crt"),
    "--client-cert",
    join(dir, "tls.crt"),
    "--client-key",
    join(dir, "tls.key"),
    "--router-id",
    "router-it",
  ]);
});

afterAll(async () => {
  await router?.stop();
  await server?.close();
  await agent?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("router fed by RouteDiscovery", () => {
  it("serves the pushed table, reports live sessions, and drops removed sessions", async () => {
    await vi.waitFor(async () => expect((await fetch(`${router.base}/readyz`)).status).toBe(200), {
      timeout: 15_000,
      interval: 100,
    });
    const a = await RawSessionClient.connect(router.sessionUrl("mc-cp-a"), "client");
    await a.upstreamStatus("east", pb.UpstreamState.UP);
    expect((await a.ping()).kind).toBe(pb.PingKind.PONG);
    await vi.waitFor(() => expect(live.some((ids) => ids.includes("mc-cp-a"))).toBe(true), {
      timeout: 10_000,
    });

    cache.remove("mc-cp-a");
    expect((await a.waitClosed(10_000)).code).toBe(4404);
    await vi.waitFor(() => expect(live.at(-1)).toEqual([]), { timeout: 10_000 });
  });

  it("keeps serving its last good table while the control plane is away", async () => {
    await server!.close();
    server = undefined;
    const b = await RawSessionClient.connect(router.sessionUrl("mc-cp-b"), "client");
    await b.upstreamStatus("east", pb.UpstreamState.UP);
    expect(
      (await b.request({ family: pb.FrameFamily.ENV, kind: pb.EnvKind.GET }, pb.EnvGetSchema, {})).as(
        pb.EnvResultSchema,
      ).vars.AGENT_NAME,
    ).toBe("east");
    b.close();
  });
});
