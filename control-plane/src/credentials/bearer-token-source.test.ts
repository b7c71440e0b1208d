import { describe, expect, it } from "vitest";
import { INVALID_OPTION } from "../../../lib/option-error.js";
import { BearerTokenSource, type TokenRequestInput } from "./bearer-token-source.js";
import { ManualClock } from "./clock.js";
import { JwtClaimsError, readServiceAccountClaims } from "./jwt-claims.js";

const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
function jwt(iat: number, exp: number, extra: Record<string, unknown> = {}): string {
  return [
    enc({ alg: "ES256" }),
    enc({
      iat,
      exp,
      aud: ["https://east.switchyard.test"],
      "kubernetes.io": { namespace: "switchyard", serviceaccount: { name: "switchyard-remote" } },
      ...extra,
    }),
    "sig",
  ].join(".");
}

async function flush(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

async function header(s: BearerTokenSource): Promise<string> {
  const o: { headers?: Record<string, unknown> } = {};
  await s.apply(o);
  return String(o.headers!.Authorization);
}

describe("readServiceAccountClaims", () => {
  it("reads lifetime and ServiceAccount", () => {
    expect(readServiceAccountClaims(jwt(100, 700))).toEqual({
      iat: 100,
      exp: 700,
      namespace: "switchyard",
      serviceAccount: "switchyard-remote",
      audiences: ["https://east.switchyard.test"],
    });
    expect(
      readServiceAccountClaims(jwt(1, 2, { "kubernetes.io": undefined, sub: "system:serviceaccount:ns:sa" })),
    ).toMatchObject({
      namespace: "ns",
      serviceAccount: "sa",
    });
  });
  it("refuses tokens it cannot renew", () => {
    expect(() => readServiceAccountClaims("a.b")).toThrow(JwtClaimsError);
    expect(() => readServiceAccountClaims(jwt(5, 5))).toThrow(/no usable iat\/exp/);
    expect(() => readServiceAccountClaims(jwt(1, 2, { "kubernetes.io": undefined }))).toThrow(
      /does not name a ServiceAccount/,
    );
  });
});

describe("BearerTokenSource", () => {
  const t0 = 1_800_000_000;

  it("renews the buffer before expiry, with the same lifetime and audiences, and uses the new token", async () => {
    const clock = new ManualClock(t0 * 1000);
    const calls: TokenRequestInput[] = [];
    const next = jwt(t0 + 500, t0 + 1100);
    const s = new BearerTokenSource({
      cluster: "east",
      initialToken: jwt(t0, t0 + 600),
      clock,
      renewBeforeExpiryMs: 100_000,
      requestToken: async (i) => {
        calls.push(i);
        return next;
      },
    });
    const stop = new AbortController();
    const run = s.start(stop.signal);
    await clock.whenSleeping();
    expect(clock.nextWakeAt()).toBe((t0 + 500) * 1000);
    clock.advance(499_000);
    await flush();
    expect(calls).toHaveLength(0);
    clock.advance(1_000);
    await flush();
    expect(calls).toEqual([
      {
        namespace: "switchyard",
        serviceAccount: "switchyard-remote",
        expirationSeconds: 600,
        audiences: ["https://east.switchyard.test"],
      },
    ]);
    expect(await header(s)).toBe(`Bearer ${next}`);
    expect(s.status()).toMatchObject({ expiresAt: (t0 + 1100) * 1000, failures: 0 });
    expect(s.status().error).toBeUndefined();
    stop.abort();
    await run;
  });

  it("defaults the buffer to a fifth of the lifetime", () => {
    const s = new BearerTokenSource({
      cluster: "e",
      initialToken: jwt(t0, t0 + 1000),
      requestToken: async () => "",
    });
    expect(s.renewAt()).toBe((t0 + 800) * 1000);
  });

  it("retries failures with capped exponential backoff and reports them before expiry", async () => {
    const clock = new ManualClock((t0 + 480) * 1000);
    let fail = true;
    let attempts = 0;
    const outcomes: string[] = [];
    const s = new BearerTokenSource({
      cluster: "east",
      initialToken: jwt(t0, t0 + 600),
      clock,
      initialBackoffMs: 1_000,
      maxBackoffMs: 4_000,
      recordRenewal: (_t, o) => outcomes.push(o),
      requestToken: async () => {
        attempts++;
        if (fail) throw new Error('serviceaccounts "switchyard-remote" is forbidden');
        return jwt(t0 + 600, t0 + 1200);
      },
    });
    const stop = new AbortController();
    const run = s.start(stop.signal);
    await flush();
    expect(attempts).toBe(1);
    expect(s.status().error).toMatch(
      /token renewal via TokenRequest for serviceaccount switchyard\/switchyard-remote failed \(attempt 1\): .*forbidden.*expires in 120s/,
    );
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      await clock.whenSleeping();
      waits.push(clock.nextWakeAt()! - clock.now());
      clock.advance(waits[i]!);
      await flush();
    }
    expect(waits).toEqual([1_000, 2_000, 4_000, 4_000]);
    expect(s.status().failures).toBe(5);
    fail = false;
    await clock.whenSleeping();
    clock.advance(4_000);
    await flush();
    expect(s.status().failures).toBe(0);
    expect(s.status().error).toBeUndefined();
    expect(outcomes).toEqual(["failure", "failure", "failure", "failure", "failure", "success"]);
    stop.abort();
    await run;
  });

  it("says the token has expired when renewal keeps failing past expiry", async () => {
    const clock = new ManualClock((t0 + 601) * 1000);
    const s = new BearerTokenSource({
      cluster: "east",
      initialToken: jwt(t0, t0 + 600),
      clock,
      requestToken: async () => {
        throw Object.assign(new Error("Unauthorized"), { code: 401 });
      },
    });
    const stop = new AbortController();
    const run = s.start(stop.signal);
    await flush();
    expect(s.status().error).toMatch(/has expired; put a fresh token in the cluster's Secret/);
    stop.abort();
    await run;
  });

  it("a replaced token (Secret changed) is used at once and reschedules renewal", async () => {
    const clock = new ManualClock(t0 * 1000);
    const s = new BearerTokenSource({
      cluster: "east",
      initialToken: jwt(t0, t0 + 600),
      clock,
      requestToken: async () => jwt(0, 1),
    });
    const stop = new AbortController();
    const run = s.start(stop.signal);
    await clock.whenSleeping();
    const fresh = jwt(t0, t0 + 6000);
    s.replaceToken(fresh);
    await flush();
    await clock.whenSleeping();
    expect(await header(s)).toBe(`Bearer ${fresh}`);
    expect(clock.nextWakeAt()).toBe((t0 + 4800) * 1000);
    stop.abort();
    await run;
  });

  it("asks for at least the API server's minimum lifetime of 10 minutes", async () => {
    const clock = new ManualClock(t0 * 1000);
    const calls: TokenRequestInput[] = [];
    const s = new BearerTokenSource({
      cluster: "east",
      initialToken: jwt(t0, t0 + 30),
      clock,
      requestToken: async (i) => {
        calls.push(i);
        return jwt(t0 + 24, t0 + 624);
      },
    });
    const stop = new AbortController();
    const run = s.start(stop.signal);
    await clock.whenSleeping();
    clock.set(s.renewAt());
    await flush();
    expect(calls.map((c) => c.expirationSeconds)).toEqual([600]);
    stop.abort();
    await run;
  });

  it("saves each renewed token, retries a failed save with backoff and warns until it is saved", async () => {
    const clock = new ManualClock((t0 + 480) * 1000);
    const renewed = jwt(t0 + 480, t0 + 1080);
    const saved: string[] = [];
    let saveFails = 2;
    const s = new BearerTokenSource({
      cluster: "east",
      initialToken: jwt(t0, t0 + 600),
      clock,
      initialBackoffMs: 1_000,
      requestToken: async () => renewed,
      saveToken: async (t) => {
        if (saveFails-- > 0) throw new Error(`API server answered 403: secrets is forbidden`);
        saved.push(t);
      },
    });
    const stop = new AbortController();
    const run = s.start(stop.signal);
    await flush();
    await clock.whenSleeping();
    expect(s.status().warning).toMatch(
      /renewed token could not be saved in the cluster's Secret \(attempt 1\): API server answered 403/,
    );
    expect(s.status().warning).not.toContain(renewed);
    expect(clock.nextWakeAt()).toBe((t0 + 481) * 1000); // first retry after 1 s
    clock.advance(1_000);
    await flush();
    await clock.whenSleeping();
    expect(s.status().warning).toMatch(/attempt 2/);
    expect(clock.nextWakeAt()).toBe((t0 + 483) * 1000); // then 2 s
    clock.advance(2_000);
    await flush();
    await clock.whenSleeping();
    expect(saved).toEqual([renewed]);
    expect(s.status().warning).toBeUndefined();
    expect(clock.nextWakeAt()).toBe((t0 + 960) * 1000); // the next renewal, nothing else
    expect(await header(s)).toBe(`Bearer ${renewed}`);
    stop.abort();
    await run;
  });

  it("the saved token coming back from the Secret changes nothing; another token replaces the unsaved one", async () => {
    const clock = new ManualClock((t0 + 480) * 1000);
    const renewed = jwt(t0 + 480, t0 + 1080);
    let saves = 0;
    const s = new BearerTokenSource({
      cluster: "east",
      initialToken: jwt(t0, t0 + 600),
      clock,
      requestToken: async () => renewed,
      saveToken: async () => {
        saves++;
        throw new Error("unreachable");
      },
    });
    const stop = new AbortController();
    const run = s.start(stop.signal);
    await flush();
    await clock.whenSleeping();
    expect(s.status().warning).toBeDefined();
    // Another replica saved this very token: it is in the Secret now.
    s.replaceToken(renewed);
    expect(s.status().warning).toBeUndefined();
    await flush();
    expect(clock.nextWakeAt()).toBe((t0 + 481) * 1000); // the pending retry sleep is not woken…
    clock.advance(1_000);
    await flush();
    await clock.whenSleeping();
    expect(saves).toBe(1); // …and finds nothing left to save
    expect(clock.nextWakeAt()).toBe((t0 + 960) * 1000);
    // A newer token from the Secret (another replica's renewal) becomes current.
    const newer = jwt(t0 + 500, t0 + 1100);
    s.replaceToken(newer);
    await flush();
    await clock.whenSleeping();
    expect(await header(s)).toBe(`Bearer ${newer}`);
    expect(clock.nextWakeAt()).toBe((t0 + 980) * 1000);
    stop.abort();
    await run;
  });

  it("validates options", () => {
    expect(
      () =>
        new BearerTokenSource({
          cluster: "e",
          initialToken: jwt(1, 2),
          requestToken: async () => "",
          renewBeforeExpiryMs: -1,
        }),
    ).toThrow(expect.objectContaining({ code: INVALID_OPTION, option: "renewBeforeExpiryMs" }));
  });
});
