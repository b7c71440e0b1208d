// The state half of RouteDiscovery: every session's routing table, published as
// immutable, versioned snapshots. The reconcilers write through one narrow seam
// (upsert / remove / replaceAll); the stream server only asks "what changed since
// version V?" and never computes differences itself.
//
// Why a change log and not snapshot diffs: a push must cost what changed, not the size
// of the table. Every published change appends (seq, sessionId) to a bounded log, so the
// delta since a version is a walk over the log's tail. Versions look like
// "<epoch>.<seq>"; the random epoch makes versions of another process (a restarted or
// failed-over control plane) unknown, which forces a full resync, as it must.
import { randomBytes } from "node:crypto";
import { clone, equals } from "@bufbuild/protobuf";
import { integerIn } from "../../../lib/option-error.js";
import { SessionRouteSchema, type SessionRoute } from "../../../proto/gen/route_discovery_pb.js";
import { RouteValidationError } from "./errors.js";
import { validateSessionRoute } from "./route-validation.js";

/** An immutable view of every session route at one version. */
export interface RouteSnapshot {
  readonly version: string;
  readonly routes: ReadonlyMap<string, Readonly<SessionRoute>>;
}

/** What a router at some version needs to reach the current version. */
export interface RouteChanges {
  /** True: `upserts` is the whole table (the asked version is unknown or too old). */
  readonly full: boolean;
  readonly version: string;
  readonly upserts: readonly Readonly<SessionRoute>[];
  readonly removes: readonly string[];
  /** performance.now() of the oldest change included (push-latency start); now for full snapshots. */
  readonly oldestChangeAtMs: number;
}

export interface RouteSnapshotCacheOptions {
  /** Change-log entries kept for deltas (default 10 000). Older versions get a full snapshot. */
  maxLogEntries?: number;
  /**
   * Serve routers at once (default false). A cache is not ready until its owner says the
   * table is complete (`replaceAll` after the reconcilers' initial list, or `markReady`):
   * a full snapshot from a half-filled cache would wipe sessions from every router.
   */
  ready?: boolean;
}

interface LogEntry {
  seq: number;
  sessionId: string;
  atMs: number;
}

type Listener = (version: string) => void;

function freezeRoute(route: SessionRoute): Readonly<SessionRoute> {
  const copy = clone(SessionRouteSchema, route);
  for (const up of copy.upstreams) Object.freeze(up);
  Object.freeze(copy.upstreams);
  return Object.freeze(copy);
}

export class RouteSnapshotCache {
  private readonly epoch = randomBytes(6).toString("hex");
  private readonly maxLogEntries: number;
  private readonly routes = new Map<string, Readonly<SessionRoute>>();
  private seq = 0;
  private log: LogEntry[] = [];
  /** Versions with seq >= this can be served as deltas. */
  private oldestDeltaSeq = 0;
  private published: RouteSnapshot | undefined;
  private readonly listeners = new Set<Listener>();
  private isReady: boolean;

  constructor(opts: RouteSnapshotCacheOptions = {}) {
    this.maxLogEntries = integerIn("maxLogEntries", opts.maxLogEntries, 10_000, 1);
    this.isReady = opts.ready ?? false;
  }

  /** True once the table is complete and may be served to routers. */
  ready(): boolean {
    return this.isReady;
  }

  /** Declares the table complete (the reconcilers finished their initial sync). */
  markReady(): void {
    if (this.isReady) return;
    this.isReady = true;
    const version = this.version();
    for (const l of this.listeners) l(version);
  }

  /**
   * Stops serving and forgets the table, publishing nothing (a replica that stopped leading:
   * its table would go stale, and pushing its removal would wipe every router). The next
   * term fills it again and says when it is complete; a router presenting a version of
   * before gets a full snapshot then.
   */
  reset(): void {
    this.isReady = false;
    this.routes.clear();
    this.log = [];
    this.seq++;
    this.oldestDeltaSeq = this.seq;
    this.published = undefined;
  }

  /** The current version; never empty (an empty table is a version too). */
  version(): string {
    return `${this.epoch}.${this.seq}`;
  }

  get size(): number {
    return this.routes.size;
  }

  get(sessionId: string): Readonly<SessionRoute> | undefined {
    return this.routes.get(sessionId);
  }

  /** The current snapshot; built lazily once per version and never mutated afterwards. */
  snapshot(): RouteSnapshot {
    const version = this.version();
    if (this.published?.version !== version) {
      this.published = Object.freeze({ version, routes: new Map(this.routes) });
    }
    return this.published;
  }

  /** Adds or replaces one session's table. A no-op change publishes no new version. */
  upsert(route: SessionRoute): string {
    validateSessionRoute(route);
    return this.commit([route], []);
  }

  /** Removes a session's table; unknown ids publish nothing. */
  remove(sessionId: string): string {
    return this.commit([], [sessionId]);
  }

  /** Makes the table exactly `routes` (e.g. after a reconciler relist), as one version; marks the cache ready. */
  replaceAll(routes: readonly SessionRoute[]): string {
    const ids = new Set<string>();
    for (const r of routes) {
      validateSessionRoute(r);
      if (ids.has(r.sessionId)) throw new RouteValidationError(r.sessionId, "listed twice in replaceAll");
      ids.add(r.sessionId);
    }
    const removes = [...this.routes.keys()].filter((id) => !ids.has(id));
    const version = this.commit(routes, removes);
    this.markReady();
    return version;
  }

  /** Calls `listener(version)` after every published change. Returns an unsubscribe function. */
  onChange(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * What a holder of `version` needs to be current: undefined when it already is, a
   * delta when the version is known and still covered by the log, else a full snapshot.
   */
  changesSince(version: string): RouteChanges | undefined {
    const current = this.version();
    if (version === current) return undefined;
    const since = this.parseOwnVersion(version);
    if (since === undefined || since < this.oldestDeltaSeq) return this.full();
    const changed = new Set<string>();
    let oldestChangeAtMs = Number.POSITIVE_INFINITY;
    for (let i = this.firstLogIndexAfter(since); i < this.log.length; i++) {
      const e = this.log[i]!;
      changed.add(e.sessionId);
      if (e.atMs < oldestChangeAtMs) oldestChangeAtMs = e.atMs;
    }
    // A delta larger than the table is worse than the table itself.
    if (changed.size > this.routes.size) return this.full();
    const upserts: Readonly<SessionRoute>[] = [];
    const removes: string[] = [];
    for (const id of changed) {
      const route = this.routes.get(id);
      if (route) upserts.push(route);
      else removes.push(id);
    }
    return { full: false, version: current, upserts, removes, oldestChangeAtMs };
  }

  private full(): RouteChanges {
    const snap = this.snapshot();
    return {
      full: true,
      version: snap.version,
      upserts: [...snap.routes.values()],
      removes: [],
      oldestChangeAtMs: performance.now(),
    };
  }

  private parseOwnVersion(version: string): number | undefined {
    const dot = version.lastIndexOf(".");
    if (dot < 0 || version.slice(0, dot) !== this.epoch) return undefined;
    const tail = version.slice(dot + 1);
    if (!/^(0|[1-9][0-9]{0,15})$/.test(tail)) return undefined;
    const seq = Number(tail);
    return seq <= this.seq ? seq : undefined;
  }

  /** Binary search: the first log index whose seq is greater than `seq`. */
  private firstLogIndexAfter(seq: number): number {
    let lo = 0;
    let hi = this.log.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.log[mid]!.seq <= seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private commit(upserts: readonly SessionRoute[], removes: readonly string[]): string {
    const changes: Array<[string, Readonly<SessionRoute> | undefined]> = [];
    for (const r of upserts) {
      const old = this.routes.get(r.sessionId);
      if (old === undefined || !equals(SessionRouteSchema, old, r))
        changes.push([r.sessionId, freezeRoute(r)]);
    }
    for (const id of removes) if (this.routes.has(id)) changes.push([id, undefined]);
    if (changes.length === 0) return this.version();

    const seq = this.seq + 1;
    const atMs = performance.now();
    for (const [id, route] of changes) {
      if (route) this.routes.set(id, route);
      else this.routes.delete(id);
      this.log.push({ seq, sessionId: id, atMs });
    }
    this.seq = seq;
    this.trimLog();
    const version = this.version();
    for (const l of this.listeners) l(version);
    return version;
  }

  private trimLog(): void {
    if (this.log.length <= this.maxLogEntries) return;
    // Drop the older half at once so trimming stays amortised O(1) per change.
    const drop = this.log.length - Math.floor(this.maxLogEntries / 2);
    this.oldestDeltaSeq = this.log[drop - 1]!.seq;
    this.log = this.log.slice(drop);
  }
}
