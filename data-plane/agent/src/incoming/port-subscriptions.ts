// Which sessions mirror or steal which of the target's ports. Rules:
// - any number of sessions may mirror a port (each gets a copy; the app still answers);
// - an unfiltered steal takes the whole port, so it is refused while another session
//   steals that port in any way, and it blocks every other session's steal;
// - filtered steals by several sessions coexist (personal intercepts); identical filters
//   from two sessions overlap completely and are refused; when a request matches several
//   filters, the oldest subscription wins.
// A session re-subscribing a port replaces its own subscription.
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
}

export class SubscriptionConflictError extends Error {
  readonly code = "SWITCHYARD_SUBSCRIPTION_CONFLICT";
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
    const others = (this.byPort.get(port) ?? []).filter((s) => s.sessionId !== sessionId);
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
    const sub: Subscription = { sessionId, port, mode, filter, match, seq: ++this.seq };
    this.byPort.set(port, [...others, sub]);
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
