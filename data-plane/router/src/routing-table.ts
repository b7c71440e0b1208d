// The router's routing table: the sessions this router serves, as pushed by the control
// plane (RouteDiscovery) or loaded from a static routes file. Implements the RouteSink
// seam of route-discovery-client.ts: a delta is validated as a whole and either applied
// atomically or rejected with a RouteTableError (which the discovery client NACKs), so the
// router keeps serving its last good table. Listeners learn which sessions changed.
import { isIP } from "node:net";
import type { SessionRoute } from "../../../proto/gen/route_discovery_pb.js";
import { SessionState } from "../../../proto/gen/route_discovery_pb.js";
import { isSecretHash } from "../../../proto/session-auth.js";
import { RouteTableError } from "./router-errors.js";

import type { RouteDelta, RouteSink } from "./route-discovery-client.js";

export type { RouteDelta, RouteSink };

export interface RouteChange {
  /** Sessions that are new or whose route changed. */
  upserted: SessionRoute[];
  /** Sessions no longer in the table. */
  removed: string[];
}

const CLUSTER_RE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/**
 * Opaque session ids, as the session path carries them: the control plane's are
 * `<namespace>:<name>` keys (proto/session-endpoint.ts), so that two same-named sessions of
 * different namespaces are two entries here, never one.
 */
const SESSION_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,316}$/;
/** A DNS name a certificate can carry as a SAN (SNI takes no IP address). */
const DNS_NAME_RE =
  /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$/;

/** A value of a pushed table in a message: quoted and cut short (a table may carry anything). */
function quote(value: string): string {
  const q = JSON.stringify(value.slice(0, 64));
  return value.length <= 64 ? q : `${q}… (${value.length} characters)`;
}

/** Checks one route; returns what is wrong (naming the field), or undefined. */
export function routeProblem(route: SessionRoute): string | undefined {
  if (!SESSION_RE.test(route.sessionId))
    return `session_id ${quote(route.sessionId)} is not a valid id: 1-317 characters of [A-Za-z0-9._:-], starting with a letter or digit`;
  const where = `session ${route.sessionId}`;
  if (!isSecretHash(route.clientKeyHash))
    return `${where}: client_key_hash must be 64 lowercase hex characters (sha256)`;
  if (route.state !== SessionState.CREATING && route.state !== SessionState.READY)
    return `${where}: state must be CREATING or READY, got ${route.state}`;
  const seen = new Set<string>();
  let defaults = 0;
  for (const u of route.upstreams) {
    if (!CLUSTER_RE.test(u.cluster))
      return `${where}: upstream cluster ${quote(u.cluster)} is not an RFC 1123 label (1-63 of a-z, 0-9, '-')`;
    if (seen.has(u.cluster)) return `${where}: upstream cluster ${u.cluster} is listed twice`;
    seen.add(u.cluster);
    let url: URL;
    try {
      url = new URL(u.url);
    } catch {
      return `${where}: upstream ${u.cluster} url ${quote(u.url)} is not a URL`;
    }
    if (url.protocol !== "ws:" && url.protocol !== "wss:")
      return `${where}: upstream ${u.cluster} url must be ws:// or wss://, got ${url.protocol}`;
    if (u.secret.length === 0) return `${where}: upstream ${u.cluster} secret is empty`;
    if (u.serverName !== "" && (isIP(u.serverName) !== 0 || !DNS_NAME_RE.test(u.serverName)))
      return `${where}: upstream ${u.cluster} server_name ${quote(u.serverName)} is not a DNS name (give the name its certificate carries, or "" for the URL's host)`;
    if (u.isDefault) defaults++;
  }
  if (route.state === SessionState.READY) {
    if (route.upstreams.length === 0) return `${where}: a READY session needs at least one upstream`;
    if (defaults !== 1) return `${where}: exactly one upstream must be the default, found ${defaults}`;
  }
  return undefined;
}

/** True when two routes would be served identically. */
export function sameRoute(a: SessionRoute, b: SessionRoute): boolean {
  if (a.clientKeyHash !== b.clientKeyHash || a.state !== b.state || a.upstreams.length !== b.upstreams.length)
    return false;
  return a.upstreams.every((u, i) => {
    const v = b.upstreams[i]!;
    return (
      u.cluster === v.cluster &&
      u.url === v.url &&
      u.secret === v.secret &&
      u.isDefault === v.isDefault &&
      u.caPem === v.caPem &&
      u.serverName === v.serverName
    );
  });
}

export class RoutingTable implements RouteSink {
  private routes = new Map<string, SessionRoute>();
  /** Unix ms at which each session's current route was applied (debug views, benchmarks). */
  private changedAt = new Map<string, number>();
  private listeners = new Set<(change: RouteChange) => void>();
  private _version = "";
  private _loaded = false;
  private _updatedAt = 0;

  /** Version of the last applied delta ("" before the first). */
  get version(): string {
    return this._version;
  }
  /** True once a table has been applied: the router is ready. */
  get loaded(): boolean {
    return this._loaded;
  }
  /** Unix ms of the last applied delta, 0 before. */
  get updatedAt(): number {
    return this._updatedAt;
  }
  get size(): number {
    return this.routes.size;
  }

  get(sessionId: string): SessionRoute | undefined {
    return this.routes.get(sessionId);
  }

  all(): IterableIterator<SessionRoute> {
    return this.routes.values();
  }

  /** Applies a delta atomically, or throws RouteTableError and keeps the previous table. */
  apply(delta: RouteDelta): void {
    if (delta.version === "")
      throw new RouteTableError("routing table delta has an empty version; versions are never empty");
    const ids = new Set<string>();
    for (const route of delta.upserts) {
      const problem = routeProblem(route);
      if (problem)
        throw new RouteTableError(`routing table version ${quote(delta.version)} rejected: ${problem}`);
      if (ids.has(route.sessionId))
        throw new RouteTableError(
          `routing table version ${quote(delta.version)} rejected: session ${route.sessionId} upserted twice`,
        );
      ids.add(route.sessionId);
    }
    const next = delta.fullResync ? new Map<string, SessionRoute>() : new Map(this.routes);
    if (!delta.fullResync) for (const id of delta.removes) next.delete(id);
    for (const route of delta.upserts) next.set(route.sessionId, route);

    const change: RouteChange = { upserted: [], removed: [] };
    for (const [id, old] of this.routes) {
      const now = next.get(id);
      if (!now) change.removed.push(id);
      else if (!sameRoute(old, now)) change.upserted.push(now);
    }
    for (const [id, route] of next) if (!this.routes.has(id)) change.upserted.push(route);

    const now = Date.now();
    for (const id of change.removed) this.changedAt.delete(id);
    for (const r of change.upserted) this.changedAt.set(r.sessionId, now);
    this.routes = next;
    this._version = delta.version;
    this._loaded = true;
    this._updatedAt = now;
    if (change.upserted.length > 0 || change.removed.length > 0) for (const l of this.listeners) l(change);
  }

  onChange(listener: (change: RouteChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * The table with secrets and hashes redacted, for /debug/routes; only `sessionId`'s entry
   * (none when absent) when given. `changedAt` is when this router applied the entry as it is.
   */
  redacted(sessionId?: string): { version: string; loaded: boolean; sessions: unknown[] } {
    const routes =
      sessionId === undefined
        ? [...this.routes.values()]
        : [this.routes.get(sessionId)].filter((r) => r !== undefined);
    return {
      version: this._version,
      loaded: this._loaded,
      sessions: routes.map((r) => ({
        sessionId: r.sessionId,
        state: SessionState[r.state] ?? String(r.state),
        changedAt: new Date(this.changedAt.get(r.sessionId) ?? this._updatedAt).toISOString(),
        clientKeyHash: "<redacted>",
        upstreams: r.upstreams.map((u) => ({
          cluster: u.cluster,
          url: redactUrl(u.url),
          isDefault: u.isDefault,
          secret: "<redacted>",
          caPem: u.caPem ? "<set>" : "",
          serverName: u.serverName,
        })),
      })),
    };
  }
}

/** Drops userinfo and query from a URL: either could carry a credential. */
function redactUrl(raw: string): string {
  try {
    const u = new URL(raw);
    u.username = "";
    u.password = "";
    u.search = "";
    return u.toString();
  } catch {
    return "<invalid>";
  }
}
