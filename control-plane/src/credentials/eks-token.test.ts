import { describe, expect, it } from "vitest";
import { verifyEksToken } from "../../../test/integration/control-plane/eks-token-webhook.js";
import { ManualClock } from "./clock.js";
import { createEksToken } from "./eks-token.js";
import { EksTokenSource } from "./eks-token-source.js";

const creds = { accessKeyId: "AKIAUNITTEST", secretAccessKey: "unit/secret+key" };
const identity = { ...creds, arn: "arn:aws:iam::1:role/cp", groups: ["g"] };

describe("createEksToken", () => {
  it("is a k8s-aws-v1 base64url presigned STS GetCallerIdentity URL with the cluster id signed", async () => {
    const at = new Date("2026-01-02T03:04:05Z");
    const token = await createEksToken({
      clusterName: "prod",
      region: "eu-north-1",
      credentials: creds,
      signingDate: at,
    });
    expect(token).toMatch(/^k8s-aws-v1\.[A-Za-z0-9_-]+$/); // no padding, url-safe alphabet
    const url = new URL(Buffer.from(token.slice(11), "base64url").toString());
    expect(url.origin).toBe("https://sts.eu-north-1.amazonaws.com");
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      Action: "GetCallerIdentity",
      Version: "2011-06-15",
      "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
      "X-Amz-Credential": "AKIAUNITTEST/20260102/eu-north-1/sts/aws4_request",
      "X-Amz-Date": "20260102T030405Z",
      "X-Amz-Expires": "900",
      "X-Amz-SignedHeaders": "host;x-k8s-aws-id",
    });
    // An independent SigV4 implementation agrees, and only for this cluster id.
    const opts = { clusterId: "prod", identities: [identity] };
    expect(verifyEksToken(token, opts, at.getTime() + 60_000).ok).toBe(true);
    expect(verifyEksToken(token, { ...opts, clusterId: "other" }, at.getTime()).ok).toBe(false);
    expect(verifyEksToken(token, opts, at.getTime() + 901_000)).toEqual({
      ok: false,
      reason: "token expired (X-Amz-Date + X-Amz-Expires passed)",
    });
  });

  it("carries the session token of temporary credentials", async () => {
    const token = await createEksToken({
      clusterName: "prod",
      region: "us-west-2",
      credentials: { ...creds, sessionToken: "sess/tok=" },
    });
    const url = new URL(Buffer.from(token.slice(11), "base64url").toString());
    expect(url.searchParams.get("X-Amz-Security-Token")).toBe("sess/tok=");
    expect(verifyEksToken(token, { clusterId: "prod", identities: [identity] }).ok).toBe(true);
  });
});

describe("EksTokenSource", () => {
  it("reuses a token for 10 minutes, then mints a new one; minting is single-flight", async () => {
    const clock = new ManualClock(Date.parse("2026-01-02T00:00:00Z"));
    let provided = 0;
    const s = new EksTokenSource({
      cluster: "prod",
      region: "eu-north-1",
      clock,
      credentialProvider: async () => {
        provided++;
        return creds;
      },
    });
    const [a, b] = await Promise.all([s.current(), s.current()]);
    expect(a).toBe(b);
    expect(provided).toBe(1);
    clock.advance(599_000);
    expect(await s.current()).toBe(a);
    clock.advance(1_000);
    const c = await s.current();
    expect(c).not.toBe(a);
    expect(s.status()).toMatchObject({
      authType: "eks",
      obtainedAt: clock.now(),
      expiresAt: clock.now() + 900_000,
      failures: 0,
    });
  });

  it("reports credential-chain failures in status and rejects the request", async () => {
    const s = new EksTokenSource({
      cluster: "prod",
      region: "eu-north-1",
      credentialProvider: async () => {
        throw new Error("Could not load credentials from any providers");
      },
    });
    await expect(s.apply({})).rejects.toMatchObject({ code: "SWITCHYARD_CREDENTIAL_UNAVAILABLE" });
    expect(s.status().error).toMatch(/default provider chain: Could not load credentials/);
  });

  it("refuses a refresh interval the URL would not survive", () => {
    expect(
      () => new EksTokenSource({ cluster: "p", region: "eu-north-1", refreshIntervalMs: 900_000 }),
    ).toThrow(/refreshIntervalMs/);
  });
});
