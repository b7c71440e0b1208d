// Fuzz of the remote-cluster credential Secret (fast-check): garbage and truncated PEM,
// certificates and keys swapped or of another pair, expired certificates, keys of other
// types, bearer tokens that are not JWTs or carry no usable claims, all with a canary in
// the secret bytes. Every outcome is material a connection can use, or a
// SWITCHYARD_CLUSTER_SECRET_INVALID error naming the Secret key and the fix — and the
// canary never appears in an error.
import { createSecureContext } from "node:tls";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { createCertificateAuthority } from "../../../test/env/pki.js";
import { FUZZ_SEED, fuzzParameters } from "../../../test/support/fuzz-parameters.js";
import { CANARY, credentialArbitraries } from "../../../test/support/malformed-credentials.js";
import { readServiceAccountClaims } from "../credentials/jwt-claims.js";
import { MtlsCredentialSource } from "../credentials/mtls-credential-source.js";
import { ClusterConfigError } from "./cluster-config-error.js";
import { parseCredentialSecret, RENEWED_TOKEN_KEY } from "./credential-secret.js";

let arbs: ReturnType<typeof credentialArbitraries>;
beforeAll(async () => {
  const ca = await createCertificateAuthority("fuzz-secret-ca");
  arbs = credentialArbitraries({
    caPem: ca.certPem,
    pair: await ca.issue({ commonName: "primary", usage: "client" }),
    other: await ca.issue({ commonName: "other", usage: "client" }),
    expired: await ca.issue({
      commonName: "old",
      usage: "client",
      notBeforeOffsetSeconds: -7_200,
      validForSeconds: -60,
    }),
  });
});
const b64 = (s: string) => Buffer.from(s).toString("base64");

function errorOf(fn: () => unknown): ClusterConfigError | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    if (!(err instanceof ClusterConfigError))
      throw new Error(`expected ClusterConfigError, got ${String(err)}`, { cause: err });
    return err;
  }
}

function expectPrecise(e: ClusterConfigError, cluster: string, keys: readonly string[]): void {
  expect(e.code).toBe("SWITCHYARD_CLUSTER_SECRET_INVALID");
  expect(e.cluster).toBe(cluster);
  expect(keys.map((k) => `Secret switchyard-cluster-${cluster} key ${k}`)).toContain(e.field);
  expect(e.fix).not.toBe("");
  expect(e.message).not.toContain(CANARY);
  expect(e.message).not.toContain(Buffer.from(CANARY).toString("base64").slice(0, 8));
  expect(e.message).not.toMatch(/\n\s+at |BEGIN|PRIVATE KEY-----/);
}

describe(`credential Secrets under fuzz (seed ${FUZZ_SEED})`, () => {
  it("mtls: usable material or an error naming tls.crt/tls.key, never the secret bytes", () => {
    const tally = { accepted: 0, refused: 0 };
    fc.assert(
      fc.property(
        fc.record({ crt: arbs.stored(arbs.certArb), key: arbs.stored(arbs.keyArb), extra: fc.boolean() }),
        ({ crt, key, extra }) => {
          const data = { "tls.crt": crt, "tls.key": key, ...(extra ? { token: b64(CANARY) } : {}) };
          const e = errorOf(() => parseCredentialSecret("onprem", "mtls", data));
          if (e) {
            tally.refused++;
            return expectPrecise(e, "onprem", ["tls.crt", "tls.key"]);
          }
          tally.accepted++;
          const m = parseCredentialSecret("onprem", "mtls", data);
          if (m.authType !== "mtls") throw new Error("wrong auth type");
          // What the connection does with it must work too.
          createSecureContext({ cert: m.certPem, key: m.keyPem });
          new MtlsCredentialSource({ cluster: "onprem", certPem: m.certPem, keyPem: m.keyPem });
        },
      ),
      fuzzParameters(300),
    );
    expect(tally.accepted).toBeGreaterThan(0);
    expect(tally.refused).toBeGreaterThan(0);
  });

  it("bearerToken: a token renewal can use, or an error naming token/renewed-token", () => {
    const tally = { accepted: 0, refused: 0 };
    fc.assert(
      fc.property(
        fc.record({
          token: arbs.stored(arbs.tokenArb),
          renewed: fc.option(arbs.stored(arbs.tokenArb), { nil: undefined }),
        }),
        ({ token, renewed }) => {
          const data = { token, ...(renewed !== undefined ? { [RENEWED_TOKEN_KEY]: renewed } : {}) };
          const e = errorOf(() => parseCredentialSecret("east", "bearerToken", data));
          if (e) {
            tally.refused++;
            return expectPrecise(e, "east", ["token", RENEWED_TOKEN_KEY]);
          }
          tally.accepted++;
          const m = parseCredentialSecret("east", "bearerToken", data);
          if (m.authType !== "bearerToken") throw new Error("wrong auth type");
          expect(() => readServiceAccountClaims(m.token)).not.toThrow();
        },
      ),
      fuzzParameters(300),
    );
    expect(tally.accepted).toBeGreaterThan(0);
    expect(tally.refused).toBeGreaterThan(0);
  });

  it("missing keys and empty values name the key the auth type needs", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("bearerToken", "mtls") as fc.Arbitrary<"bearerToken" | "mtls">,
        fc.dictionary(
          fc.constantFrom("token", "tls.crt", "tls.key", "ca.crt", "x"),
          fc.constantFrom("", " "),
        ),
        (authType, data) => {
          const e = errorOf(() => parseCredentialSecret("west", authType, data));
          expect(e).toBeDefined();
          expectPrecise(e!, "west", authType === "mtls" ? ["tls.crt", "tls.key"] : ["token"]);
        },
      ),
      fuzzParameters(100),
    );
  });
});
