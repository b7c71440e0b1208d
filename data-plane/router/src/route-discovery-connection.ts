// One RouteDiscovery connection to the control plane, as the client dials and watches it:
// TLS (or, explicitly, plaintext) credentials built per dial, a fresh HTTP/2 connection per
// stream attempt with keepalive PINGs, a dial abandoned when it is not established in time
// (UNAVAILABLE, retried by the caller), and a watch that sees the connection leave READY —
// the control plane's GOAWAY (maximum connection age, draining) — while a stream still runs.
import {
  connectivityState,
  credentials as channelCredentials,
  status as Status,
  type ChannelCredentials,
  type Client,
  type ClientDuplexStream,
} from "@grpc/grpc-js";
import {
  RouteDiscoveryGrpcClient,
  type DiscoveryRequest,
  type DiscoveryResponse__Output,
} from "../../../proto/route-discovery-service.js";
import type { RouteDiscoveryClientCredentials } from "./route-discovery-options.js";

/** A PING unanswered this long means the control plane is gone, ms. */
const KEEPALIVE_TIMEOUT_MS = 15_000;

export type RouteDiscoveryConnection = InstanceType<typeof RouteDiscoveryGrpcClient>;

export type DiscoveryCall = ClientDuplexStream<DiscoveryRequest, DiscoveryResponse__Output>;

/** TLS (or, explicitly, plaintext) credentials; built per connection so a bad PEM is a retried error. */
function credentialsFor(tls: RouteDiscoveryClientCredentials["tls"]): ChannelCredentials {
  if (!tls) return channelCredentials.createInsecure();
  return channelCredentials.createSsl(
    Buffer.from(tls.ca),
    tls.key !== undefined ? Buffer.from(tls.key) : null,
    tls.cert !== undefined ? Buffer.from(tls.cert) : null,
  );
}

/**
 * A fresh HTTP/2 connection per stream attempt (a local subchannel pool: grpc-js would
 * otherwise share one connection among clients of the same target): after UNAVAILABLE
 * (e.g. a replica that is not the leader) or GOAWAY the next attempt is balanced anew.
 */
export function dialControlPlane(
  target: string,
  tls: RouteDiscoveryClientCredentials["tls"],
  keepaliveMs: number,
): RouteDiscoveryConnection {
  return new RouteDiscoveryGrpcClient(target, credentialsFor(tls), {
    "grpc.use_local_subchannel_pool": 1,
    "grpc.keepalive_time_ms": keepaliveMs,
    "grpc.keepalive_timeout_ms": KEEPALIVE_TIMEOUT_MS,
    "grpc.keepalive_permit_without_calls": 1,
    // A full snapshot of a large table is one message; its size is the table's.
    "grpc.max_receive_message_length": -1,
  });
}

/** Resolves once `client`'s connection is established; rejects UNAVAILABLE after `timeoutMs`. */
export function connected(
  client: RouteDiscoveryConnection,
  target: string,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(new Error("stopped"));
    signal.addEventListener("abort", onAbort, { once: true });
    client.waitForReady(Date.now() + timeoutMs, (err) => {
      signal.removeEventListener("abort", onAbort);
      if (!err) return resolve();
      const details = `no connection to ${target} within ${timeoutMs} ms (${err.message}); dialling again`;
      reject(Object.assign(new Error(details), { code: Status.UNAVAILABLE, details }));
    });
  });
}

/**
 * Calls `onClosing` once when the channel leaves READY after reaching it: the server sent
 * GOAWAY (maximum connection age, draining) and new calls would need a new connection,
 * while the open stream may go on until the server's grace ends. A connection that simply
 * drops leaves READY too, but its stream then ends with a status of its own, which the
 * caller records as an error. Returns a function that stops watching.
 */
export function onConnectionClosing(
  channel: ReturnType<Client["getChannel"]>,
  onClosing: () => void,
): () => void {
  let stopped = false;
  // The stream starts on an established connection (`connected`): READY from the start.
  let wasReady = channel.getConnectivityState(false) === connectivityState.READY;
  const watch = (from: connectivityState): void => {
    if (stopped) return;
    channel.watchConnectivityState(from, Infinity, () => {
      if (stopped) return;
      const now = channel.getConnectivityState(false);
      if (wasReady && now !== connectivityState.READY) {
        stopped = true;
        onClosing();
        return;
      }
      if (now === connectivityState.READY) wasReady = true;
      watch(now);
    });
  };
  watch(channel.getConnectivityState(false));
  return () => {
    stopped = true;
  };
}
