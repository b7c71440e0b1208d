// What a port proxy hands a session and how the session answers: a raw connection's
// description (IncomingConnectionInfo), the controls the session drives it with
// (ConnectionControl), the sink its client's bytes go to (ConnectionSink), and a stolen
// HTTP request's head (StolenHttpRequest). TrafficSession is the session layer's side
// (session-traffic.ts implements it); port-proxy.ts and the forwarding modules call it.
import type { RequestHead } from "./http-filter.js";
import type { StolenCaller } from "./stolen-caller.js";

export interface IncomingConnectionInfo {
  /** Unique per agent. */
  readonly id: number;
  readonly port: number;
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly mode: "mirror" | "steal";
}

/** Where a connection came from, before it is given an id and a mode. */
export type ConnectionOrigin = Omit<IncomingConnectionInfo, "id" | "mode">;

/** How the session layer talks back on a raw connection it was given. */
export interface ConnectionControl {
  /** Bytes for the client (ignored for mirrors: the app answers). */
  write(data: Buffer): boolean;
  /** Ends the client side. */
  end(): void;
  /** Flow control of the client → session direction. */
  pause(): void;
  resume(): void;
  /** Calls `cb` once after `write` returned false and the client drained (or closed). */
  drained(cb: () => void): void;
}

/** What the session layer returns for a raw connection: where the client's bytes go. */
export interface ConnectionSink {
  /** False means "slow down" (steal: the client is paused until `control.resume()`; mirror: ignored). */
  data(chunk: Buffer): boolean;
  end(): void;
}

/** A stolen HTTP request's head; its body and answer go through its StolenCaller. */
export interface StolenHttpRequest {
  readonly port: number;
  readonly remoteAddress: string;
  readonly head: RequestHead;
}

/** Implemented by the session layer (one per session). */
export interface TrafficSession {
  readonly id: string;
  connection(info: IncomingConnectionInfo, control: ConnectionControl): ConnectionSink;
  /** Takes a stolen request: answers it through `caller` (a 502 through `caller.fail` when it cannot). */
  request(req: StolenHttpRequest, caller: StolenCaller): void;
}

let nextId = 0;

/** The next IncomingConnectionInfo id: unique per agent, never 0. */
export const newConnectionId = (): number => (nextId = (nextId + 1) >>> 0 || 1);
