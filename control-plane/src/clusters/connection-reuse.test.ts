import type { AddressInfo } from "node:net";
import { createServer as createHttpsServer, type Server } from "node:https";
import { KubeConfig, VersionApi } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { createCertificateAuthority } from "../../../test/env/pki.js";
import type { RemoteClusterConfig } from "../config/cluster-config.js";
import type { CredentialSource, RequestCredentials } from "../credentials/credential-source.js";
import { reuseConnections } from "./connection-reuse.js";
import { RemoteClusterClient } from "./remote-cluster-client.js";
import { RemoteRequestTimeoutError } from "./request-timeout.js";

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/**
 * An API server stand-in that counts TLS handshakes; with `hangNext` set the next request is
 * never answered, with `delayNextMs` the next one is answered that late.
 */
async function versionServer() {
  const ca = await createCertificateAuthority("unit-reuse");
  const serving = await ca.issue({ commonName: "api", usage: "server", ipAddresses: ["127.0.0.1"] });
  const stats = { handshakes: 0, hangNext: false, delayNextMs: 0 };
  const srv = createHttpsServer({ cert: serving.certPem, key: serving.keyPem }, (_req, res) => {
    if (stats.hangNext) return void (stats.hangNext = false);
    const delay = stats.delayNextMs;
    stats.delayNextMs = 0;
    setTimeout(() => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ gitVersion: "v1.36.3", major: "1", minor: "36" }));
    }, delay);
  });
  srv.on("secureConnection", () => stats.handshakes++);
  servers.push(srv);
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  return { url: `https://127.0.0.1:${(srv.address() as AddressInfo).port}`, caPem: ca.certPem, stats };
}

function kubeConfig(url: string, caPem: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      { name: "c", server: url, caData: Buffer.from(caPem).toString("base64"), skipTLSVerify: false },
    ],
    users: [{ name: "u", token: "t" }],
    contexts: [{ name: "c", cluster: "c", user: "u" }],
    currentContext: "c",
  });
  return kc;
}

describe("reuseConnections", () => {
  it("sends a KubeConfig's API calls over one kept-alive connection instead of one handshake each", async () => {
    const api = await versionServer();
    const plain = kubeConfig(api.url, api.caPem).makeApiClient(VersionApi);
    for (let i = 0; i < 3; i++) await plain.getCode();
    expect(api.stats.handshakes).toBe(3); // client-node alone: a new agent, a new connection per call

    const kc = reuseConnections(kubeConfig(api.url, api.caPem));
    expect(reuseConnections(kc)).toBe(kc);
    const reused = kc.makeApiClient(VersionApi);
    for (let i = 0; i < 3; i++) expect((await reused.getCode()).gitVersion).toBe("v1.36.3");
    expect(api.stats.handshakes).toBe(4);
  });

  it("still verifies the server against the cluster's CA", async () => {
    const api = await versionServer();
    const other = await createCertificateAuthority("unit-other");
    const err = await reuseConnections(kubeConfig(api.url, other.certPem))
      .makeApiClient(VersionApi)
      .getCode()
      .then(
        () => undefined,
        (e: unknown) => e as Error & { code?: string },
      );
    expect(err?.message).toMatch(/certificate/i);
  });

  it("a remote call past its deadline ends alone: a call sharing its connections still succeeds", async () => {
    const api = await versionServer();
    const source: CredentialSource = {
      authType: "bearerToken",
      async apply(opts: RequestCredentials) {
        opts.headers = { ...(opts.headers ?? {}), Authorization: "Bearer t" };
      },
      status: () => ({ authType: "bearerToken", failures: 0 }),
      start: async () => undefined,
    };
    const cluster: RemoteClusterConfig = {
      name: "east",
      authType: "bearerToken",
      server: api.url,
      caPem: api.caPem,
      region: undefined,
      namespace: "switchyard",
      isDefault: false,
    };
    const client = new RemoteClusterClient({ cluster, credential: source, requestTimeoutMs: 400 });
    const version = client.makeApiClient(VersionApi);
    await version.getCode(); // one kept-alive connection exists
    api.stats.hangNext = true;
    const hanging = version.getCode().then(
      () => undefined,
      (e: unknown) => e,
    );
    // In flight when the first one's deadline passes (at 400 ms), answered at ~500 ms.
    const meanwhile = new Promise((r) => setTimeout(r, 300)).then(() => {
      api.stats.delayNextMs = 200;
      return version.getCode();
    });
    expect((await meanwhile).gitVersion).toBe("v1.36.3");
    expect(await hanging).toBeInstanceOf(RemoteRequestTimeoutError);
    expect((await version.getCode()).gitVersion).toBe("v1.36.3");
  });
});
