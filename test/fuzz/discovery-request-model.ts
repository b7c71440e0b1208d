// What the control plane's RouteDiscovery server must do with a router's stream of
// DiscoveryRequests, written from the protocol rules of proto/route_discovery.proto and the
// server's README (status codes, counters) rather than from its code: which request ends the
// stream, with which gRPC status and naming which field, or — when none does — how many
// ACKs, NACKs and stale nonces it counted. The model assumes the routing table does not
// change while the stream is open, so the server pushes at most once (nonce 1, the current
// version) unless the router's first request already names the current version.
import { status } from "@grpc/grpc-js";
import fc from "fast-check";

/** A DiscoveryRequest as sent (proto3 JSON-ish shape of the grpc-js wire types). */
export interface Req {
  routerId: string;
  versionInfo: string;
  responseNonce: string;
  errorDetail: { message: string } | null;
  liveSessions: { sessionIds: string[] } | null;
}

export interface ModelLimits {
  /** The server's maxLiveSessionsPerReport. */
  maxLiveSessions: number;
  /** The cache's current version (what the push carries). */
  current: string;
}

export type Expected =
  | { ends: number; names: RegExp; at: number }
  | { open: true; acks: number; nacks: number; stale: number; pushes: number };

const routerIdFormat = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,251}[A-Za-z0-9])?$/;
const nonceFormat = /^[1-9][0-9]{0,15}$/;
/** Versions the server issues are short ("<epoch>.<seq>"); it refuses to store a longer claim. */
export const MAX_VERSION_CHARS = 256;
const SESSION_ID_MAX = 317;

export function expectedOutcome(reqs: readonly Req[], lim: ModelLimits): Expected {
  let acks = 0;
  let nacks = 0;
  let stale = 0;
  let lastNonce = 0;
  let outstanding: number | undefined;
  const end = (code: number, names: RegExp, at: number): Expected => ({ ends: code, names, at });
  const live = (r: Req, at: number): Expected | undefined => {
    if (r.liveSessions === null) return undefined;
    if (r.liveSessions.sessionIds.length > lim.maxLiveSessions)
      return end(status.RESOURCE_EXHAUSTED, /live_sessions/, at);
    if (r.liveSessions.sessionIds.some((id) => id.length === 0 || id.length > SESSION_ID_MAX))
      return end(status.INVALID_ARGUMENT, /live_sessions\.session_ids/, at);
    return undefined;
  };
  const first = reqs[0]!;
  if (!routerIdFormat.test(first.routerId)) return end(status.INVALID_ARGUMENT, /router_id/, 0);
  if (first.responseNonce !== "") stale++;
  if (first.errorDetail !== null && first.responseNonce === "")
    return end(status.INVALID_ARGUMENT, /error_detail.*response_nonce/, 0);
  if (first.versionInfo.length > MAX_VERSION_CHARS) return end(status.INVALID_ARGUMENT, /version_info/, 0);
  const l0 = live(first, 0);
  if (l0) return l0;
  if (first.versionInfo !== lim.current) {
    lastNonce = 1;
    outstanding = 1;
  }
  const pushes = lastNonce;
  for (let at = 1; at < reqs.length; at++) {
    const r = reqs[at]!;
    if (r.routerId !== "" && r.routerId !== first.routerId)
      return end(status.INVALID_ARGUMENT, /router_id/, at);
    const l = live(r, at);
    if (l) return l;
    if (r.responseNonce === "") {
      if (r.errorDetail !== null) return end(status.INVALID_ARGUMENT, /error_detail.*response_nonce/, at);
      continue;
    }
    if (!nonceFormat.test(r.responseNonce)) return end(status.INVALID_ARGUMENT, /response_nonce/, at);
    const nonce = Number(r.responseNonce);
    if (nonce > lastNonce) return end(status.INVALID_ARGUMENT, /response_nonce/, at);
    if (outstanding === undefined || nonce !== outstanding) {
      stale++;
      continue;
    }
    outstanding = undefined;
    if (r.errorDetail !== null) nacks++;
    else if (r.versionInfo !== lim.current) return end(status.INVALID_ARGUMENT, /ACK .*version/, at);
    else acks++;
  }
  return { open: true, acks, nacks, stale, pushes };
}

/** Placeholder for the cache's current version, replaced when the request is sent. */
export const CURRENT = "\u0000current";

/** A huge value, written short so a failure prints readably: "\u0000huge:<char>:<count>". */
const HUGE = "\u0000huge:";
const huge = (char: string, count: number) => `${HUGE}${char}:${count}`;

/** The request as sent: placeholders replaced by the current version and the huge values. */
export function expand(r: Req, current: string): Req {
  const one = (s: string): string => {
    if (s === CURRENT) return current;
    if (!s.startsWith(HUGE)) return s;
    const [char, count] = s.slice(HUGE.length).split(":");
    return char!.repeat(Number(count));
  };
  return {
    routerId: one(r.routerId),
    versionInfo: one(r.versionInfo),
    responseNonce: one(r.responseNonce),
    errorDetail: r.errorDetail && { message: one(r.errorDetail.message) },
    liveSessions: r.liveSessions && { sessionIds: r.liveSessions.sessionIds.map(one) },
  };
}

const garbage = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.string({ unit: "binary", maxLength: 30 }),
  fc.constantFrom(huge("x", 5_000), huge("9", 70_000), huge("é", 400), "\u0000", " "),
);

/** A router id: this stream's, empty, another router's, or garbage. */
const routerIdArb = (own: string) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.constant(own) },
    { weight: 1, arbitrary: fc.constantFrom("", "router-b", "bad id!", "-x", huge("a", 254)) },
    { weight: 1, arbitrary: garbage },
  );

const nonceArb = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom("", "1", "1", "2") },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "0",
      "01",
      "-1",
      "1.0",
      " 1",
      "abc",
      "99999999999999999",
      "18446744073709551617",
    ),
  },
  { weight: 1, arbitrary: garbage },
);

const versionArb = fc.oneof(
  { weight: 3, arbitrary: fc.constant(CURRENT) },
  { weight: 2, arbitrary: fc.constantFrom("", "0.1", "other-epoch.7") },
  { weight: 1, arbitrary: garbage },
);

const sessionIdArb = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom("shop:mc-a", "shop:mc-b", "plain-id") },
  { weight: 1, arbitrary: fc.constantFrom("", huge("s", 318), huge("s", 317)) },
  { weight: 1, arbitrary: fc.string({ maxLength: 20 }) },
);

/** A request a correct router could send: its id or none, a nonce it may have seen, valid reports. */
const wellFormedArb = (own: string): fc.Arbitrary<Req> =>
  fc
    .record({
      routerId: fc.constantFrom(own, own, ""),
      versionInfo: fc.constantFrom(CURRENT, CURRENT, CURRENT, "", "0.1"),
      responseNonce: fc.constantFrom("", "", "1", "2"),
      errorDetail: fc.option(fc.record({ message: fc.string({ maxLength: 40 }) }), { nil: null, freq: 3 }),
      liveSessions: fc.option(
        fc.record({
          sessionIds: fc.array(fc.constantFrom("shop:mc-a", "shop:mc-b", "plain-id"), { maxLength: 3 }),
        }),
        { nil: null, freq: 2 },
      ),
    })
    // A NACK always names the push it refuses.
    .map((r) => (r.responseNonce === "" ? { ...r, errorDetail: null } : r));

/** Anything in every field: wrong, stale, garbage or huge. */
const hostileArb = (own: string): fc.Arbitrary<Req> =>
  fc.record({
    routerId: routerIdArb(own),
    versionInfo: versionArb,
    responseNonce: nonceArb,
    errorDetail: fc.option(
      fc.record({ message: fc.oneof(fc.string({ maxLength: 40 }), fc.constant(huge("m", 50_000))) }),
      { nil: null, freq: 3 },
    ),
    liveSessions: fc.option(fc.record({ sessionIds: fc.array(sessionIdArb, { maxLength: 24 }) }), {
      nil: null,
      freq: 2,
    }),
  });

/** One request of a router's stream: mostly what a correct router sends, sometimes anything. */
export const reqArb = (ownRouterId: string): fc.Arbitrary<Req> =>
  fc.oneof(
    { weight: 4, arbitrary: wellFormedArb(ownRouterId) },
    { weight: 1, arbitrary: hostileArb(ownRouterId) },
  );
