// Allow-list, audiences and result caching of the TokenReview authenticator. The review
// itself is an injected function here; the integration suite runs real TokenReviews
// against a real API server (test/integration/route-discovery).
import { describe, expect, it } from "vitest";
import { INVALID_OPTION } from "../../../lib/option-error.js";
import { RouterAuthenticator } from "./router-authenticator.js";
import {
  TokenReviewAuthenticator,
  type TokenReviewResult,
  type TokenReviewer,
} from "./token-review-authenticator.js";

const sa = (ns: string, name: string) => `system:serviceaccount:${ns}:${name}`;

function reviewer(answers: Record<string, TokenReviewResult | Error>): TokenReviewer & { calls: string[] } {
  const calls: string[] = [];
  const fn = async (token: string) => {
    calls.push(token);
    const a = answers[token];
    if (a === undefined)
      return { authenticated: false, username: "", audiences: [], error: "invalid bearer token" };
    if (a instanceof Error) throw a;
    return a;
  };
  return Object.assign(fn, { calls });
}

const ok = (username: string, audiences = ["https://primary.switchyard.test"]): TokenReviewResult => ({
  authenticated: true,
  username,
  audiences,
  error: "",
});

describe("TokenReviewAuthenticator", () => {
  it("accepts allowed ServiceAccounts and refuses others with the right failure", async () => {
    const r = reviewer({ good: ok(sa("switchyard", "router")), other: ok(sa("default", "default")) });
    const a = new TokenReviewAuthenticator({
      reviewer: r,
      allowedServiceAccounts: [{ namespace: "switchyard", name: "router" }],
    });
    await expect(a.authenticate("good")).resolves.toEqual({
      kind: "serviceAccount",
      name: sa("switchyard", "router"),
    });
    await expect(a.authenticate("other")).rejects.toMatchObject({ failure: "permission_denied" });
    await expect(a.authenticate("forged")).rejects.toMatchObject({ failure: "unauthenticated" });
  });

  it("checks audiences when configured", async () => {
    const r = reviewer({ t: ok(sa("ns", "r"), ["other-audience"]) });
    const a = new TokenReviewAuthenticator({
      reviewer: r,
      allowedServiceAccounts: [{ namespace: "ns", name: "r" }],
      audiences: ["switchyard-control-plane"],
    });
    await expect(a.authenticate("t")).rejects.toMatchObject({ failure: "unauthenticated" });
  });

  it("caches positive and negative results for their TTLs, keyed by token", async () => {
    let now = 0;
    const r = reviewer({ good: ok(sa("ns", "r")) });
    const a = new TokenReviewAuthenticator({
      reviewer: r,
      allowedServiceAccounts: [{ namespace: "ns", name: "r" }],
      cacheTtlMs: 1000,
      negativeCacheTtlMs: 100,
      now: () => now,
    });
    await Promise.all([a.authenticate("good"), a.authenticate("good")]);
    await a.authenticate("bad").catch(() => undefined);
    await a.authenticate("bad").catch(() => undefined);
    expect(r.calls).toEqual(["good", "bad"]);
    now = 500;
    await a.authenticate("good");
    await a.authenticate("bad").catch(() => undefined);
    expect(r.calls).toEqual(["good", "bad", "bad"]);
    now = 2000;
    await a.authenticate("good");
    expect(r.calls.filter((c) => c === "good")).toHaveLength(2);
  });

  it("reports an unreachable API server as unavailable and does not cache it", async () => {
    const answers: Record<string, TokenReviewResult | Error> = { t: new Error("connect ECONNREFUSED") };
    const r = reviewer(answers);
    const a = new TokenReviewAuthenticator({
      reviewer: r,
      allowedServiceAccounts: [{ namespace: "ns", name: "r" }],
    });
    await expect(a.authenticate("t")).rejects.toMatchObject({ failure: "unavailable" });
    answers.t = ok(sa("ns", "r"));
    await expect(a.authenticate("t")).resolves.toMatchObject({ name: sa("ns", "r") });
  });

  it("validates its options", () => {
    const r = reviewer({});
    expect(() => new TokenReviewAuthenticator({ reviewer: r, allowedServiceAccounts: [] })).toThrow(
      expect.objectContaining({
        code: INVALID_OPTION,
        option: "allowedServiceAccounts",
      }),
    );
    expect(
      () => new TokenReviewAuthenticator({ allowedServiceAccounts: [{ namespace: "a", name: "b" }] }),
    ).toThrow(/kubeConfig/);
    expect(
      () =>
        new TokenReviewAuthenticator({
          reviewer: r,
          allowedServiceAccounts: [{ namespace: "A B", name: "b" }],
        }),
    ).toThrow(/namespace\/name/);
  });
});

describe("RouterAuthenticator", () => {
  const bearer = {
    authenticate: async (t: string) => ({ kind: "serviceAccount" as const, name: `sa:${t}` }),
  };

  it("prefers a bearer token, then a verified certificate, else refuses", async () => {
    const a = new RouterAuthenticator({ bearer, clientCertificate: {} });
    const cert = { authorized: true, commonName: "router", authorizationError: undefined };
    await expect(
      a.authenticate({ authorization: "Bearer abc", clientCertificate: cert }),
    ).resolves.toMatchObject({
      name: "sa:abc",
    });
    await expect(
      a.authenticate({ authorization: undefined, clientCertificate: cert }),
    ).resolves.toMatchObject({
      name: "cn:router",
    });
    await expect(
      a.authenticate({ authorization: undefined, clientCertificate: { ...cert, authorized: false } }),
    ).rejects.toMatchObject({ failure: "unauthenticated" });
    await expect(
      a.authenticate({ authorization: "Basic xyz", clientCertificate: undefined }),
    ).rejects.toMatchObject({
      failure: "unauthenticated",
    });
    await expect(
      a.authenticate({ authorization: undefined, clientCertificate: undefined }),
    ).rejects.toMatchObject({
      failure: "unauthenticated",
    });
  });

  it("ignores certificates when only tokens are configured", async () => {
    const a = new RouterAuthenticator({ bearer });
    const cert = { authorized: true, commonName: "router", authorizationError: undefined };
    await expect(a.authenticate({ authorization: undefined, clientCertificate: cert })).rejects.toMatchObject(
      {
        failure: "unauthenticated",
      },
    );
  });

  it("needs at least one method", () => {
    expect(() => new RouterAuthenticator({})).toThrow(expect.objectContaining({ code: INVALID_OPTION }));
  });
});
