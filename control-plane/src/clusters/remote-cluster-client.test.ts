import { createServer as createTlsServer, type Server } from "node:tls";
import type { AddressInfo } from "node:net";
import { createServer as createHttpsServer } from "node:https";
import { VersionApi } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { INVALID_OPTION } from "../../../lib/option-error.js";
import { createCertificateAuthority } from "../../../test/env/pki.js";
import type { RemoteClusterConfig } from "../config/cluster-config.js";
import type { CredentialSource, RequestCredentials } from "../credentials/credential-source.js";
import { checkClusterHealth } from "./cluster-health-checker.js";
import { describeRemoteError } from "./remote-error.js";
import { RemoteClusterClient } from "./remote-cluster-client.js";
import { RemoteRequestTimeoutError } from "./request-timeout.js";

const servers: Array<{ close(): void }> = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** A credential source that hands out a counter, to see which value each request carried. */
function countingSource(): CredentialSource & { n: number } {
  return {
    authType: "bearerToken",
    n: 0,
    async apply(opts: RequestCredentials) {
      opts.headers = { ...(opts.headers ?? {}), Authorization: `Bearer token-${++this.n}` };
    },
    status: () => ({ authType: "bearerToken", failures: 0 }),
    start: async () => undefined,
  };
}

async function tlsPair() {
  const ca = await createCertificateAuthority("unit-remote");
  const serving = await ca.issue({ commonName: "api", usage: "server", ipAddresses: ["127.0.0.1"] });
  return { ca, serving };
}

function cluster(server: string, caPem: string): RemoteClusterConfig {
  return {
    name: "east",
    authType: "bearerToken",
    server,
    caPem,
    region: undefined,
    namespace: "switchyard",
    isDefault: false,
  };
}

describe("RemoteClusterClient", () => {
  it("asks the credential source on every request", async () => {
    const { ca, serving } = await tlsPair();
    const seen: string[] = [];
    const srv = createHttpsServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
      seen.push(String(req.headers.authorization));
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ gitVersion: "v1.36.3", major: "1", minor: "36" }));
    });
    servers.push(srv);
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const url = `https://127.0.0.1:${(srv.address() as AddressInfo).port}`;
    const client = new RemoteClusterClient({
      cluster: cluster(url, ca.certPem),
      credential: countingSource(),
    });
    const api = client.makeApiClient(VersionApi);
    await api.getCode();
    await api.getCode();
    expect(seen).toEqual(["Bearer token-1", "Bearer token-2"]);
  });

  it("fails a request to a server that never answers after requestTimeoutMs, and the health check reports it", async () => {
    const { ca, serving } = await tlsPair();
    // Completes the TLS handshake, then never says a word.
    const hole: Server = createTlsServer({ cert: serving.certPem, key: serving.keyPem }, () => undefined);
    servers.push(hole);
    await new Promise<void>((r) => hole.listen(0, "127.0.0.1", r));
    const url = `https://127.0.0.1:${(hole.address() as AddressInfo).port}`;
    const client = new RemoteClusterClient({
      cluster: cluster(url, ca.certPem),
      credential: countingSource(),
      requestTimeoutMs: 300,
    });
    const err = await client
      .makeApiClient(VersionApi)
      .getCode()
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(RemoteRequestTimeoutError);
    expect((err as Error).message).toBe(`cluster "east": no answer from ${url} within 300 ms`);
    const h = await checkClusterHealth(client);
    expect(h.connected).toBeUndefined();
    expect(h.error).toBe(`no answer from ${url} within 300 ms`);
  });

  it("validates options", () => {
    expect(
      () =>
        new RemoteClusterClient({
          cluster: cluster("https://x", ""),
          credential: countingSource(),
          requestTimeoutMs: 0,
        }),
    ).toThrow(expect.objectContaining({ code: INVALID_OPTION, option: "requestTimeoutMs" }));
  });
});

describe("describeRemoteError", () => {
  const s = "https://api:6443";
  it("explains HTTP, TLS and socket failures with what to check", () => {
    expect(describeRemoteError({ code: 401, body: "{}" }, "bearerToken", s)).toMatch(
      /401 Unauthorized.*fresh token/,
    );
    expect(describeRemoteError({ code: 401 }, "eks", s)).toMatch(/access entry/);
    expect(describeRemoteError({ code: 403, body: { message: "nope" } }, "mtls", s)).toMatch(
      /forbidden \(403\): nope; install the member ClusterRoles/,
    );
    expect(describeRemoteError({ code: "SELF_SIGNED_CERT_IN_CHAIN", message: "x" }, "mtls", s)).toMatch(
      /^TLS: the certificate of https:\/\/api:6443 is not signed by the CA in caData/,
    );
    expect(describeRemoteError({ code: "ECONNREFUSED", message: "x" }, "mtls", s)).toBe(
      "unreachable: connection refused by https://api:6443",
    );
    expect(describeRemoteError({ code: 500, body: '{"message":"etcd down"}' }, "mtls", s)).toBe(
      "the API server answered 500: etcd down",
    );
  });
});
