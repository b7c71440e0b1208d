import { beforeAll, describe, expect, it } from "vitest";
import { createCertificateAuthority, type KeyPairPem } from "../../../test/env/pki.js";
import { ClusterConfigError } from "./cluster-config-error.js";
import { parseCredentialSecret, pickBearerToken, RENEWED_TOKEN_KEY } from "./credential-secret.js";

const b64 = (s: string) => Buffer.from(s).toString("base64");
/** Three parts, but claims nobody can renew from. */
const jwt = b64("h") + "." + b64("p") + ".s";
const claims = (c: object) => Buffer.from(JSON.stringify(c)).toString("base64url");
const saToken = [b64("{}"), claims({ iat: 1, exp: 3601, sub: "system:serviceaccount:sy:sa" }), "s"].join(".");
let pair: KeyPairPem;
let other: KeyPairPem;
beforeAll(async () => {
  const ca = await createCertificateAuthority("unit");
  pair = await ca.issue({ commonName: "a", usage: "client" });
  other = await ca.issue({ commonName: "b", usage: "client" });
});

function fails(fn: () => unknown): ClusterConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ClusterConfigError);
    expect((err as ClusterConfigError).code).toBe("SWITCHYARD_CLUSTER_SECRET_INVALID");
    return err as ClusterConfigError;
  }
  throw new Error("expected a Secret error");
}

describe("parseCredentialSecret", () => {
  it("reads each auth type's keys", () => {
    expect(parseCredentialSecret("east", "bearerToken", { token: b64(saToken + "\n") })).toEqual({
      authType: "bearerToken",
      token: saToken,
    });
    expect(
      parseCredentialSecret("on", "mtls", { "tls.crt": b64(pair.certPem), "tls.key": b64(pair.keyPem) }),
    ).toMatchObject({ authType: "mtls" });
    expect(parseCredentialSecret("eks", "eks", undefined)).toEqual({ authType: "eks" });
  });

  it("names the missing Secret, the missing key and the fix", () => {
    expect(fails(() => parseCredentialSecret("east", "bearerToken", undefined)).message).toMatch(
      /cluster "east": Secret switchyard-cluster-east: does not exist\. Fix: create Secret switchyard-cluster-east labelled switchyard.dev\/remote-cluster-credentials=true with key token/,
    );
    const e = fails(() => parseCredentialSecret("on", "mtls", { "tls.crt": b64(pair.certPem) }));
    expect(e.field).toBe("Secret switchyard-cluster-on key tls.key");
    expect(e.message).toMatch(/is missing \(authType mtls needs tls.crt and tls.key\)/);
  });

  it("rejects unusable material without echoing it", () => {
    const e1 = fails(() => parseCredentialSecret("east", "bearerToken", { token: b64("s3cr3t-not-a-jwt") }));
    expect(e1.message).toMatch(/is not a JWT/);
    expect(e1.message).not.toContain("s3cr3t");
    const e3 = fails(() => parseCredentialSecret("east", "bearerToken", { token: b64(jwt) }));
    expect(e3.field).toBe("Secret switchyard-cluster-east key token");
    expect(e3.message).toMatch(
      /not a usable ServiceAccount token: payload is not base64url JSON\. Fix: store a bound/,
    );
    const legacy = [b64("{}"), claims({ sub: "system:serviceaccount:sy:sa" }), "s"].join(".");
    // A renewed-token without readable claims loses to a readable token instead of failing.
    expect(
      parseCredentialSecret("east", "bearerToken", { token: b64(saToken), [RENEWED_TOKEN_KEY]: b64(jwt) }),
    ).toEqual({ authType: "bearerToken", token: saToken });
    const e5 = fails(() => parseCredentialSecret("east", "bearerToken", { token: b64(legacy) }));
    expect(e5.message).toMatch(
      /key token: is not a usable ServiceAccount token: has no usable iat\/exp claims/,
    );
    const e2 = fails(() =>
      parseCredentialSecret("on", "mtls", { "tls.crt": b64(pair.certPem), "tls.key": b64(other.keyPem) }),
    );
    expect(e2.message).toMatch(/does not match the certificate/);
    expect(e2.message).not.toContain("PRIVATE KEY");
    fails(() => parseCredentialSecret("on", "mtls", { "tls.crt": b64("junk"), "tls.key": b64(pair.keyPem) }));
  });

  it("starts from the renewed token once it is newer, and from a fresher token an operator stores", () => {
    const sa = (iat: number, exp: number) =>
      [
        b64("{}"),
        Buffer.from(
          JSON.stringify({ iat, exp, sub: "system:serviceaccount:switchyard:switchyard-remote" }),
        ).toString("base64url"),
        "s",
      ].join(".");
    const now = 10_000_000;
    const at = (s: number) => now / 1000 + s;
    const original = sa(at(-90_000), at(-3_600)); // expired an hour ago
    const renewed = sa(at(-600), at(85_800));
    const data = { token: b64(original), [RENEWED_TOKEN_KEY]: b64(renewed + "\n") };
    expect(parseCredentialSecret("east", "bearerToken", data, now)).toEqual({
      authType: "bearerToken",
      token: renewed,
    });
    const fresh = sa(at(-5), at(3_595));
    expect(pickBearerToken(fresh, renewed, now)).toBe(fresh); // issued later
    expect(pickBearerToken(sa(at(-5), at(-1)), renewed, now)).toBe(renewed); // later but expired
    expect(pickBearerToken(original, sa(at(-95_000), at(-4_000)), now)).toBe(original); // both expired
    expect(pickBearerToken(original, "garbage", now)).toBe(original);
    expect(pickBearerToken(jwt, renewed, now)).toBe(renewed); // claims of `token` unreadable
    expect(pickBearerToken(renewed, renewed, now)).toBe(renewed);
  });
});
