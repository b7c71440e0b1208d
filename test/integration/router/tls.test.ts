// TLS on both faces of the router: a gateway router serves wss:// with a certificate
// from a test CA; a Primary router reaches it as a wss:// upstream verified with the
// route's ca_pem; a client verifies the gateway with the CA and is refused without it.
// An upstream dialled by IP whose certificate names only "switchyard-agent" (as sidecar
// agents are, by pod IP) is verified against the route's server_name, and refused without it.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as pb from "../../../proto/gen/session_pb.js";
import { createCertificateAuthority, type CertificateAuthority } from "../../env/index.js";
import { ScriptedAgent } from "../../peers/scripted-agent.js";
import { RawSessionClient } from "../../peers/raw-session-client.js";
import { RouterProcess } from "./router-process.js";

let ca: CertificateAuthority;
let dir: string;
let agent: ScriptedAgent;
let gateway: RouterProcess;
let primary: RouterProcess;
/** A wss:// upstream whose certificate names only the DNS name switchyard-agent. */
let named: RouterProcess;

beforeAll(async () => {
  ca = await createCertificateAuthority("switchyard-test-ca");
  const leaf = await ca.issue({
    commonName: "gateway",
    ipAddresses: ["127.0.0.1"],
    dnsNames: ["localhost"],
    usage: "server",
  });
  const agentLeaf = await ca.issue({
    commonName: "switchyard-agent",
    dnsNames: ["switchyard-agent"],
    usage: "server",
  });
  dir = mkdtempSync(join(tmpdir(), "switchyard-tls-"));
  writeFileSync(join(dir, "tls.crt"), leaf.certPem);
  writeFileSync(join(dir, "tls.key"), leaf.keyPem);
  writeFileSync(join(dir, "agent.crt"), agentLeaf.certPem);
  writeFileSync(join(dir, "agent.key"), agentLeaf.keyPem);
  agent = new ScriptedAgent({ name: "pod-a", secret: "agent" });
  await agent.start();
  gateway = await RouterProcess.start(
    [
      {
        sessionId: "mc-child",
        secret: "child",
        upstreams: [{ cluster: "pod-a", url: agent.url(), secret: "agent", isDefault: true }],
      },
    ],
    ["--tls-cert", join(dir, "tls.crt"), "--tls-key", join(dir, "tls.key")],
  );
  named = await RouterProcess.start(
    [
      {
        sessionId: "mc-child",
        secret: "child",
        upstreams: [{ cluster: "pod-a", url: agent.url(), secret: "agent", isDefault: true }],
      },
    ],
    ["--tls-cert", join(dir, "agent.crt"), "--tls-key", join(dir, "agent.key")],
  );
  const byIp = named.sessionUrl("mc-child");
  primary = await RouterProcess.start([
    {
      sessionId: "mc-parent",
      secret: "client",
      upstreams: [
        {
          cluster: "east",
          url: gateway.sessionUrl("mc-child"),
          secret: "child",
          isDefault: true,
          caPem: ca.certPem,
        },
      ],
    },
    {
      sessionId: "by-name",
      secret: "client",
      upstreams: [
        {
          cluster: "pod-a",
          url: byIp,
          secret: "child",
          isDefault: true,
          caPem: ca.certPem,
          serverName: "switchyard-agent",
        },
      ],
    },
    {
      sessionId: "by-ip",
      secret: "client",
      upstreams: [{ cluster: "pod-a", url: byIp, secret: "child", isDefault: true, caPem: ca.certPem }],
    },
  ]);
});

afterAll(async () => {
  await primary?.stop();
  await named?.stop();
  await gateway?.stop();
  await agent?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("TLS", () => {
  it("reaches a wss:// gateway verified with the route's CA", async () => {
    const client = await RawSessionClient.connect(primary.sessionUrl("mc-parent"), "client");
    await client.upstreamStatus("east", pb.UpstreamState.UP);
    const env = await client.request(
      { family: pb.FrameFamily.ENV, kind: pb.EnvKind.GET },
      pb.EnvGetSchema,
      {},
    );
    expect(env.as(pb.EnvResultSchema).vars.AGENT_NAME).toBe("pod-a");
    client.close();
  });

  it("reaches an upstream dialled by IP whose certificate names only server_name", async () => {
    expect(named.sessionUrl("mc-child")).toMatch(/^wss:\/\/127\.0\.0\.1:/);
    const client = await RawSessionClient.connect(primary.sessionUrl("by-name"), "client");
    await client.upstreamStatus("pod-a", pb.UpstreamState.UP);
    expect((await client.ping()).kind).toBe(pb.PingKind.PONG);
    client.close();
  });

  it("refuses that upstream without server_name: its certificate does not name the IP", async () => {
    const client = await RawSessionClient.connect(primary.sessionUrl("by-ip"), "client");
    const down = (await client.upstreamStatus("pod-a", pb.UpstreamState.DOWN)).as(pb.UpstreamStatusSchema);
    expect(down.error).toMatch(/IP: 127\.0\.0\.1 is not in the cert's list/);
    const logged = await primary.waitForLog(
      (l) => l.msg === "upstream link down" && /is not in the cert's list/.test(String(l.error)),
    );
    expect(logged.cluster).toBe("pod-a");
    client.close();
  });

  it("serves clients over wss:// and fails verification without the CA", async () => {
    expect(gateway.sessionUrl("mc-child")).toMatch(/^wss:/);
    const ok = await RawSessionClient.connect(gateway.sessionUrl("mc-child"), "child", { ca: ca.certPem });
    expect((await ok.ping()).kind).toBe(pb.PingKind.PONG);
    ok.close();
    await expect(RawSessionClient.connect(gateway.sessionUrl("mc-child"), "child")).rejects.toThrow(
      /certificate/i,
    );
  });
});
