// Fuzz of the control plane's RouteDiscovery server (control-plane/src/route-discovery), the
// edge a router reaches: the real grpc-js server over mutual TLS, with streams of fuzzed
// DiscoveryRequests (router ids, versions and nonces that are wrong, stale, garbage or huge;
// NACKs without a nonce; live-session reports too long or with bad ids), streams from
// routers that are not allowed or not authenticated, and messages that are not protobuf at
// all. For every stream the server ends it with the status the protocol model
// (discovery-request-model.ts) expects — naming the field, in a bounded message — or keeps it
// open with exactly the ACKs, NACKs and stale nonces the model counts; each violation is
// counted once; another router's stream keeps receiving and acknowledging pushes and
// reporting live sessions throughout, and no ended stream is left registered.
import { create } from "@bufbuild/protobuf";
import { Client, credentials, Metadata, status, type StatusObject } from "@grpc/grpc-js";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  RouteDiscoveryServer,
  RouteDiscoveryStreamServer,
  RouteSnapshotCache,
  RouterAuthenticator,
  type LiveSessionsReport,
} from "../../control-plane/src/route-discovery/index.js";
import { SessionRouteSchema, SessionState } from "../../proto/gen/route_discovery_pb.js";
import { statusName } from "../../proto/route-discovery-service.js";
import { hashSecret } from "../../proto/session-auth.js";
import { createCertificateAuthority, type CertificateAuthority, type KeyPairPem } from "../env/pki.js";
import { RawDiscoveryStream } from "../integration/route-discovery/raw-discovery-stream.js";
import { eventually } from "../support/poll.js";
import { FUZZ_SEED, fuzzParameters } from "../support/fuzz-parameters.js";
import { expand, expectedOutcome, reqArb, type Req } from "./discovery-request-model.js";

const MAX_LIVE = 20;
let ca: CertificateAuthority;
let routerCert: KeyPairPem;
let forbiddenCert: KeyPairPem;
let cache: RouteSnapshotCache;
let streams: RouteDiscoveryStreamServer;
let server: RouteDiscoveryServer;
let url: string;
let bystander: RawDiscoveryStream;
const reports: LiveSessionsReport[] = [];
let changes = 0;

const route = (id: string) =>
  create(SessionRouteSchema, {
    sessionId: id,
    clientKeyHash: hashSecret(`client-${id}`),
    state: SessionState.READY,
    upstreams: [{ cluster: "east", url: "wss://gw.east.test:8443", secret: `s-${id}`, isDefault: true }],
  });

const counts = () => {
  const c = streams.metrics.counts;
  return {
    acks: c.acks,
    nacks: c.nacks,
    stale: c.staleNonces,
    protocol: new Map(c.protocolErrors),
    auth: { ...c.auth },
  };
};

function open(identity: "router" | "forbidden" | "none" | "bad-bearer"): RawDiscoveryStream {
  const cert = identity === "router" ? routerCert : identity === "forbidden" ? forbiddenCert : undefined;
  return new RawDiscoveryStream({
    url,
    ca: ca.certPem,
    ...(cert ? { cert: cert.certPem, key: cert.keyPem } : {}),
    ...(identity === "bad-bearer" ? { token: "not a token" } : {}),
  });
}

/** A change every other router must receive, ACK, and report live sessions after. */
async function bystanderRound(): Promise<void> {
  const n = ++changes;
  const version = cache.upsert(route(`shop:mc-change-${n}`));
  const before = bystander.responses.length;
  const res = await bystander.waitFor(before + 1);
  expect(res.versionInfo).toBe(version);
  bystander.ack(res);
  bystander.send({ liveSessions: { sessionIds: [`shop:probe-${n}`] } });
  await eventually(
    `bystander's live report ${n}`,
    () => reports.some((r) => r.routerId === "bystander" && r.sessionIds[0] === `shop:probe-${n}`),
    { timeoutMs: 5000, intervalMs: 5 },
  );
  expect(bystander.invariantViolations).toEqual([]);
}

const withTimeout = <T>(p: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([
    p,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms)),
  ]);

beforeAll(async () => {
  ca = await createCertificateAuthority("route-discovery-fuzz");
  const serverCert = await ca.issue({
    commonName: "control-plane",
    usage: "server",
    ipAddresses: ["127.0.0.1"],
  });
  routerCert = await ca.issue({ commonName: "router", usage: "client" });
  forbiddenCert = await ca.issue({ commonName: "not-a-router", usage: "client" });
  cache = new RouteSnapshotCache({ ready: true });
  cache.replaceAll([route("shop:mc-a"), route("shop:mc-b")]);
  streams = new RouteDiscoveryStreamServer({
    cache,
    authenticator: new RouterAuthenticator({ clientCertificate: { allowedCommonNames: ["router"] } }),
    maxLiveSessionsPerReport: MAX_LIVE,
  });
  streams.onLiveSessions((r) => reports.push(r));
  server = new RouteDiscoveryServer({
    streams,
    host: "127.0.0.1",
    tls: { certPem: serverCert.certPem, keyPem: serverCert.keyPem, clientCaPem: ca.certPem },
  });
  url = (await server.listen()).url;
  bystander = open("router");
  bystander.send({ routerId: "bystander", liveSessions: { sessionIds: ["shop:mc-a"] } });
  bystander.ack(await bystander.waitFor(1));
  // The stream is read in order: once this report arrives, the ACK above is counted, so it
  // cannot land in the first run's before/after window.
  bystander.send({ liveSessions: { sessionIds: ["shop:probe-0"] } });
  await eventually(
    "bystander's first live report",
    () => reports.some((r) => r.routerId === "bystander" && r.sessionIds[0] === "shop:probe-0"),
    { timeoutMs: 5000, intervalMs: 5 },
  );
});

afterAll(async () => {
  bystander?.cancel();
  await server?.close();
});

describe(`RouteDiscovery server under fuzzed requests (seed ${FUZZ_SEED})`, () => {
  it("ends each bad stream with a precise, bounded, counted status and leaves other routers' streams alone", async () => {
    const endings = new Map<string, number>();
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("router", "router", "router", "router", "router", "forbidden", "none", "bad-bearer"),
        fc.array(reqArb("router-a"), { minLength: 1, maxLength: 5 }),
        async (identity, template) => {
          run++;
          const current = cache.version();
          const reqs: Req[] = template.map((r) => expand(r, current));
          const before = counts();
          const s = open(identity);
          try {
            for (const r of reqs) s.send(r);
            if (identity !== "router") {
              const end = (await withTimeout(s.ended, 5000, "a refusal")) as StatusObject;
              const code = identity === "forbidden" ? status.PERMISSION_DENIED : status.UNAUTHENTICATED;
              expect(end.code).toBe(code);
              expect(end.details).toMatch(
                identity === "forbidden" ? /CN "not-a-router"/ : /credentials|Bearer/,
              );
              const result = identity === "forbidden" ? "permission_denied" : "unauthenticated";
              expect(counts().auth[result] - before.auth[result]).toBe(1);
              endings.set(statusName(code), (endings.get(statusName(code)) ?? 0) + 1);
              return;
            }
            const want = expectedOutcome(reqs, { maxLiveSessions: MAX_LIVE, current });
            if ("ends" in want) {
              const end = (await withTimeout(s.ended, 5000, `status ${statusName(want.ends)}`)) as
                StatusObject | undefined;
              expect(end?.code, `request #${want.at}: ${end?.details.slice(0, 200)}`).toBe(want.ends);
              expect(end!.details).toMatch(want.names);
              // Garbage is quoted, not echoed whole: the status (and the log line) stays small.
              expect(end!.details.length).toBeLessThanOrEqual(600);
              const name = statusName(want.ends);
              expect((counts().protocol.get(name) ?? 0) - (before.protocol.get(name) ?? 0)).toBe(1);
              endings.set(name, (endings.get(name) ?? 0) + 1);
            } else {
              // Still open: a live report after the batch proves every request was read.
              const probe = `shop:fuzz-probe-${run}`;
              s.send({ liveSessions: { sessionIds: [probe] } });
              await eventually("the probe report", () => reports.some((r) => r.sessionIds[0] === probe), {
                timeoutMs: 5000,
                intervalMs: 5,
              });
              const after = counts();
              expect([
                after.acks - before.acks,
                after.nacks - before.nacks,
                after.stale - before.stale,
              ]).toEqual([want.acks, want.nacks, want.stale]);
              expect(s.responses.length).toBe(want.pushes);
              endings.set("open", (endings.get("open") ?? 0) + 1);
            }
            expect(s.invariantViolations).toEqual([]);
          } finally {
            s.cancel();
          }
          await bystanderRound();
        },
      ),
      fuzzParameters(300),
    );
    await eventually("only the bystander registered", () => streams.connectedRouters().length === 1, {
      timeoutMs: 5000,
    });
    console.log("route-discovery request fuzz: streams ended", Object.fromEntries(endings));
  });

  it("ends a stream whose message is not a DiscoveryRequest with INVALID_ARGUMENT, counted", async () => {
    const [host, port] = url.replace("https://", "").split(":");
    const creds = credentials.createSsl(
      Buffer.from(ca.certPem),
      Buffer.from(routerCert.keyPem),
      Buffer.from(routerCert.certPem),
    );
    const outcomes = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        fc.uint8Array({ minLength: 1, maxLength: 64 }),
        async (afterFirst, bytes) => {
          const before = counts();
          const client = new Client(`${host}:${port}`, creds, { "grpc.use_local_subchannel_pool": 1 });
          const call = client.makeBidiStreamRequest(
            "/switchyard.routes.v1.RouteDiscovery/StreamRoutes",
            (b: Buffer) => b,
            (b: Buffer) => b,
            new Metadata(),
          );
          call.on("data", () => undefined);
          call.on("error", () => undefined);
          const ended = new Promise<StatusObject>((r) => call.on("status", r));
          // A first request naming the router (field 1), then the bytes; or the bytes alone.
          if (afterFirst) call.write(Buffer.from([0x0a, 0x08, ...Buffer.from("router-r")]));
          call.write(Buffer.from(bytes));
          // Bytes that happen to decode are a (mostly empty) request: end the stream ourselves then.
          const end = await Promise.race([
            ended,
            new Promise<undefined>((r) => setTimeout(() => r(undefined), 300)),
          ]);
          call.cancel();
          client.close();
          const code = end ? statusName(end.code) : "open";
          outcomes.set(code, (outcomes.get(code) ?? 0) + 1);
          expect(["open", "InvalidArgument", "ResourceExhausted", "Cancelled"]).toContain(code);
          if (end?.code === status.INVALID_ARGUMENT) {
            expect(end.details).toMatch(
              /DiscoveryRequest|router_id|live_sessions|error_detail|response_nonce|version/,
            );
            expect(
              (counts().protocol.get("InvalidArgument") ?? 0) - (before.protocol.get("InvalidArgument") ?? 0),
            ).toBe(1);
          }
          await bystanderRound();
        },
      ),
      fuzzParameters(60),
    );
    await eventually("only the bystander registered", () => streams.connectedRouters().length === 1, {
      timeoutMs: 5000,
    });
    console.log("route-discovery garbage messages:", Object.fromEntries(outcomes));
    expect(outcomes.get("InvalidArgument")).toBeGreaterThan(0);
  });
});
