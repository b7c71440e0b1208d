// Routing-table pushes for the router-side RouteDiscovery fuzz: valid session routes, and
// the same routes with one defect a broken control plane could push — ids, hashes, states,
// clusters, URLs, secrets, server names that are wrong, empty or huge; no or two defaults;
// a cluster or a session listed twice; a push without a version or a nonce. Each defect
// carries what the router's NACK must name (the field), taken from the router's README and
// route_discovery.proto.
import fc from "fast-check";
import { SessionState } from "../../proto/gen/route_discovery_pb.js";
import type { SessionRoute } from "../../proto/gen/grpc/switchyard/routes/v1/SessionRoute.js";
import { hashSecret } from "../../proto/session-auth.js";

export interface RouteCase {
  route: SessionRoute;
  /** The defect, or undefined for a valid route. */
  defect: string | undefined;
  /** What the NACK's error_detail must name. */
  names: RegExp | undefined;
}

/** A valid READY route whose upstreams are never dialled (no client attaches to it). */
export function validRoute(sessionId: string, clusters = ["east", "west"]): SessionRoute {
  return {
    sessionId,
    clientKeyHash: hashSecret(`client-${sessionId}`),
    state: SessionState.READY,
    upstreams: clusters.map((cluster, i) => ({
      cluster,
      url: `ws://127.0.0.1:9/v1/sessions/${sessionId}`,
      secret: `secret-${cluster}`,
      isDefault: i === 0,
      serverName: i === 1 ? "switchyard-agent" : "",
    })),
  };
}

type Defect = { name: string; names: RegExp; apply: (r: SessionRoute) => fc.Arbitrary<SessionRoute> };

const ups = (r: SessionRoute) => r.upstreams!;
const withUpstream = (r: SessionRoute, i: number, patch: object): SessionRoute => ({
  ...r,
  upstreams: ups(r).map((u, j) => (j === i ? { ...u, ...patch } : u)),
});

const defects: readonly Defect[] = [
  {
    name: "session-id",
    names: /session_id/,
    apply: (r) =>
      fc
        .constantFrom("", " ", "a b", ":x", "-lead", "s".repeat(318), "é", "x".repeat(70_000))
        .map((sessionId) => ({ ...r, sessionId })),
  },
  {
    name: "client-key-hash",
    names: /client_key_hash/,
    apply: (r) =>
      fc
        .constantFrom("", "abc", "A".repeat(64), "g".repeat(64), r.clientKeyHash!.slice(1), "secret")
        .map((clientKeyHash) => ({ ...r, clientKeyHash })),
  },
  {
    name: "state",
    names: /state/,
    // 3 and 99 are not in the enum: the wire carries them all the same.
    apply: (r) => fc.constantFrom(0, 3, 99).map((state) => ({ ...r, state: state as SessionRoute["state"] })),
  },
  { name: "no-upstreams", names: /upstream/, apply: (r) => fc.constant({ ...r, upstreams: [] }) },
  {
    name: "defaults",
    names: /default/,
    apply: (r) =>
      fc.boolean().map((both) => ({ ...r, upstreams: ups(r).map((u) => ({ ...u, isDefault: both })) })),
  },
  {
    name: "cluster",
    names: /cluster/,
    apply: (r) =>
      fc
        .constantFrom("", "East", "a_b", "-a", "x".repeat(64), "c".repeat(100_000))
        .map((cluster) => withUpstream(r, 1, { cluster })),
  },
  {
    name: "cluster-twice",
    names: /cluster .*twice/,
    apply: (r) => fc.constant(withUpstream(r, 1, { cluster: "east" })),
  },
  {
    name: "url",
    names: /url/,
    apply: (r) =>
      fc
        .constantFrom(
          "",
          "not a url",
          "http://127.0.0.1:9/",
          "ws://[::1",
          "file:///etc/passwd",
          "ws://h:99999/",
          "u".repeat(70_000),
        )
        .map((url) => withUpstream(r, 0, { url })),
  },
  { name: "secret", names: /secret/, apply: (r) => fc.constant(withUpstream(r, 1, { secret: "" })) },
  {
    name: "server-name",
    names: /server_name/,
    apply: (r) =>
      fc
        .constantFrom("127.0.0.1", "::1", "a b", "-x", "X.example", "n".repeat(300))
        .map((serverName) => withUpstream(r, 1, { serverName })),
  },
];

/** A route with a fresh id `sessionId`: valid, or broken by one defect. */
export function routeCaseArb(sessionId: string, broken: boolean): fc.Arbitrary<RouteCase> {
  const good = validRoute(sessionId);
  if (!broken) return fc.constant({ route: good, defect: undefined, names: undefined });
  return fc
    .constantFrom(...defects)
    .chain((d) => d.apply(good).map((route) => ({ route, defect: d.name, names: d.names })));
}

/** Defects of a push as a whole (not of one route). */
export const PUSH_DEFECTS: Readonly<Record<string, RegExp>> = {
  "session-twice": /upserted twice/,
  "no-version": /version/,
  "no-nonce": /nonce/,
};
