// Which sessions mirror or steal which of the target's ports. Rules:
// - any number of sessions may mirror a port (each gets a copy; the app still answers);
// - an unfiltered steal takes the whole port, so it is refused while another session
//   steals that port in any way, and it blocks every other session's steal;
// - filtered steals by several sessions coexist (personal intercepts); identical filters
//   from two sessions overlap completely and are refused; when a request matches several
//   filters, the oldest subscription wins.
// A session re-subscribing a port replaces its own subscription.
// A session whose connection was lost (not closed by its client) may have its
// subscriptions *held*: the port proxy holds new traffic for them until the session
// re-subscribes (live again, in its old place) or the hold is dropped (traffic goes on to
// the app). This keeps a router failover from handing the session's traffic to the app.
// A held steal gives way to a live session's conflicting steal.
import { ErrorCode } from "../../../../proto/error-codes.js";
import { compileHttpFilter, type CompiledFilter, type HttpFilter } from "./http-filter.js";

export type SubscriptionMode = "mirror" | "steal";

export interface Subscription {
  readonly sessionId: string;
  readonly port: number;
  readonly mode: SubscriptionMode;
  /** Only for steal; undefined steals everything. */
  readonly filter: HttpFilter | undefined;
  readonly match: CompiledFilter | undefined;
  /** Order of subscription, for "oldest wins". */
  readonly seq: number;
  /** Its session's connection was lost; traffic for it waits (see the file comment). */
  readonly held: boolean;
}

export class SubscriptionConflictError extends Error {
  readonly code = ErrorCode.SUBSCRIPTION_CONFLICT;
}

export class PortSubscriptions {
  private readonly byPort = new Map<number, Subscription[]>();
  private seq = 0;
  private readonly listeners = new Set<(port: number) => void>();

  /** Validates and records a subscription; throws HttpFilterError or SubscriptionConflictError. */
  subscribe(sessionId: string, port: number, mode: SubscriptionMode, filter?: HttpFilter): Subscription {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new SubscriptionConflictError(`port ${port} is not a TCP port (1-65535)`);
    }
    if (mode === "mirror" && filter) {
      throw new SubscriptionConflictError(
        "mirror takes no HTTP filter: a mirror sees every connection on the port",
      );
    }
    const match = filter ? compileHttpFilter(filter) : undefined;
    const all = (this.byPort.get(port) ?? []).filter((s) => s.sessionId !== sessionId);
    // A held steal keeps the app from getting its session's traffic, not a live session
    // from taking the port: a conflicting held steal gives way (its session, should it
    // come back, is refused when it renews).
    const displaced = new Set<Subscription>();
    if (mode === "steal") {
      const key = filter ? JSON.stringify(filter) : "";
      for (const s of all)
        if (s.held && s.mode === "steal" && (!filter || !s.filter || JSON.stringify(s.filter) === key))
          displaced.add(s);
    }
    const others = all.filter((s) => !displaced.has(s));
    if (mode === "steal") {
      const steals = others.filter((s) => s.mode === "steal");
      const unfiltered = steals.find((s) => !s.filter);
      if (unfiltered) {
        throw new SubscriptionConflictError(
          `port ${port} is already stolen without a filter by session ${unfiltered.sessionId}; steal with an HTTP filter once it ends, or mirror instead`,
        );
      }
      if (!filter && steals.length > 0) {
        throw new SubscriptionConflictError(
          `port ${port} is stolen with HTTP filters by ${steals.length} other session(s); an unfiltered steal would take their requests — add an HTTP filter (e.g. a header only your requests carry) or mirror instead`,
        );
      }
      const key = filter ? JSON.stringify(filter) : "";
      const same = steals.find((s) => JSON.stringify(s.filter) === key);
      if (same) {
        throw new SubscriptionConflictError(
          `session ${same.sessionId} already steals port ${port} with the same HTTP filter; use a filter only your requests match`,
        );
      }
    }
    const list = (this.byPort.get(port) ?? []).filter((s) => !displaced.has(s));
    const own = list.findIndex((s) => s.sessionId === sessionId);
    // Renewing its own subscription (e.g. after a reconnect) keeps the session's place.
    const seq = own >= 0 ? list[own]!.seq : ++this.seq;
    const sub: Subscription = { sessionId, port, mode, filter, match, seq, held: false };
    this.byPort.set(port, own >= 0 ? list.map((s, i) => (i === own ? sub : s)) : [...others, sub]);
    this.emit(port);
    return sub;
  }

  unsubscribe(sessionId: string, port: number): boolean {
    const list = this.byPort.get(port) ?? [];
    const rest = list.filter((s) => s.sessionId !== sessionId);
    if (rest.length === list.length) return false;
    if (rest.length === 0) this.byPort.delete(port);
    else this.byPort.set(port, rest);
    this.emit(port);
    return true;
  }

  /** Drops every subscription of a session (it closed or timed out). Returns the ports it had. */
  dropSession(sessionId: string): number[] {
    const ports: number[] = [];
    for (const port of [...this.byPort.keys()]) if (this.unsubscribe(sessionId, port)) ports.push(port);
    return ports;
  }

  /** Holds every subscription of a session (its connection was lost). Returns the ports held. */
  hold(sessionId: string): number[] {
    const ports: number[] = [];
    for (const [port, list] of this.byPort) {
      if (!list.some((s) => s.sessionId === sessionId && !s.held)) continue;
      this.byPort.set(
        port,
        list.map((s) => (s.sessionId === sessionId ? { ...s, held: true } : s)),
      );
      ports.push(port);
      this.emit(port);
    }
    return ports;
  }

  /** Drops a session's subscriptions that are still held (not renewed). Returns their ports. */
  dropHeld(sessionId: string): number[] {
    const ports: number[] = [];
    for (const [port, list] of [...this.byPort]) {
      const rest = list.filter((s) => !(s.sessionId === sessionId && s.held));
      if (rest.length === list.length) continue;
      if (rest.length === 0) this.byPort.delete(port);
      else this.byPort.set(port, rest);
      ports.push(port);
      this.emit(port);
    }
    return ports;
  }

  /** Every subscription, oldest first (what the journal saves). */
  all(): Subscription[] {
    return [...this.byPort.values()].flat().sort((a, b) => a.seq - b.seq);
  }

  /** The port's subscriptions, oldest first (an immutable snapshot). */
  forPort(port: number): readonly Subscription[] {
    return this.byPort.get(port) ?? [];
  }

  onChange(cb: (port: number) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  private emit(port: number): void {
    for (const cb of this.listeners) cb(port);
  }
}
