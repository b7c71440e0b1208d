// Client → upstreams (DESIGN §5), decided from the frame header alone: env/file/DNS/outgoing
// to the Default upstream; traffic to the upstream that owns the connection (its id remapped
// to the agent's); ping and subscriptions broadcast to every live upstream and merged into one
// reply (mergedReply); control to every upstream.
import { ErrorCode } from "../../../proto/error-codes.js";
import { setConnectionId } from "../../../proto/frame-codec.js";
import { FrameFamily, HealthState, SubscriptionKind, TrafficKind } from "../../../proto/gen/session_pb.js";
import { BroadcastMerge } from "./broadcast-merge.js";
import type { RoutingState } from "./routing-state.js";
import { Sent, type UpstreamLink } from "./upstream-link.js";

const F = FrameFamily;

/** Routes a checked client frame (after hello) by its family. */
export function routeFromClient(s: RoutingState, data: Buffer): void {
  switch (data[0]!) {
    case F.ENV:
    case F.FILE:
    case F.DNS:
    case F.OUTGOING_TCP:
    case F.OUTGOING_UDP:
      return toDefault(s, data);
    case F.TRAFFIC:
      return toOwner(s, data);
    case F.PING:
    case F.SUBSCRIPTION:
    case F.CONTROL:
      return broadcast(s, data);
  }
}

function toDefault(s: RoutingState, data: Buffer): void {
  const link = s.defaultLink;
  if (!link)
    return s.client.refuse(data, ErrorCode.NO_DEFAULT_UPSTREAM, "this session has no default upstream");
  sendToLink(s, link, data, true);
}

function toOwner(s: RoutingState, data: Buffer): void {
  const id = data.readUInt32BE(8);
  const owner = s.conns.owner(id);
  if (!owner) {
    if (data[1] === TrafficKind.CLOSE) {
      // Both ends closing at once is normal: count it, do not answer with an error.
      s.metrics.badFrame("client", ErrorCode.CONNECTION_ALREADY_CLOSED);
      return;
    }
    return s.client.refuse(
      data,
      ErrorCode.UNKNOWN_CONNECTION,
      `connection ${id} is not open on this session`,
    );
  }
  if (data[1] === TrafficKind.CLOSE) s.conns.close(id);
  setConnectionId(data, owner.agentId);
  sendToLink(s, owner.upstream, data, true);
}

function broadcast(s: RoutingState, data: Buffer): void {
  const family = data[0]!;
  const kind = data[1]!;
  if (family === F.CONTROL) {
    // close / log level: fire-and-forget to every upstream.
    for (const link of s.links.values()) sendToLink(s, link, data, false);
    return;
  }
  const requestId = data.readUInt32BE(4);
  if (s.broadcasts.has(requestId))
    return s.client.refuse(
      data,
      ErrorCode.DUPLICATE_REQUEST_ID,
      `request ${requestId} is still in flight; use a new request id`,
    );
  if (s.broadcasts.size >= s.limits.maxPendingMerges)
    return s.client.refuse(
      data,
      ErrorCode.TOO_MANY_PENDING,
      `more than ${s.limits.maxPendingMerges} broadcasts in flight; wait for answers`,
    );
  if (
    family === F.SUBSCRIPTION &&
    kind !== SubscriptionKind.UNSUBSCRIBE &&
    !s.subscriptions.has(data.readUInt32BE(8)) &&
    s.subscriptions.size >= s.limits.maxSubscriptions
  )
    return s.client.refuse(
      data,
      ErrorCode.TOO_MANY_SUBSCRIPTIONS,
      `a session may hold ${s.limits.maxSubscriptions} subscriptions`,
    );

  const merge = new BroadcastMerge(family, kind, requestId, data);
  s.broadcasts.add(merge);
  for (const link of s.links.values()) {
    if (!link.live) {
      merge.skipped(link.cluster, link.lastError || "not connected");
      continue;
    }
    if (family === F.PING && link.congested) {
      // A ping must not queue behind a congested upstream or stall the session: report it instead.
      s.metrics.event("shed_ping_congested");
      merge.skipped(link.cluster, "congested");
      continue;
    }
    merge.waiting.add(link);
    merge.reachedUp.set(link, link.ups + (link.state === "open" ? 0 : 1));
    if (sendToLink(s, link, data, false) === Sent.Rejected)
      merge.giveUp(link, HealthState.DOWN, "send rejected");
  }
  if (merge.waiting.size === 0) s.broadcasts.finish(merge);
}

/** Sends with backpressure; answers the client with an error when the link cannot take it. */
function sendToLink(s: RoutingState, link: UpstreamLink, data: Buffer, reportRejection: boolean): Sent {
  const r = s.flow.toUpstream(link, data);
  if (r === Sent.Rejected && reportRejection)
    s.client.error(
      ErrorCode.UPSTREAM_UNAVAILABLE,
      `upstream ${link.cluster} is ${link.state}${link.lastError ? ` (${link.lastError})` : ""}; retry after its UpstreamStatus UP`,
      { requestId: data.readUInt32BE(4), family: data[0], kind: data[1], cluster: link.cluster },
    );
  return r;
}

/** One merged reply per broadcast; a settled subscription change updates what is replayed. */
export function mergedReply(s: RoutingState, merge: BroadcastMerge): void {
  const reply = merge.reply();
  if (merge.family === F.SUBSCRIPTION) {
    const subscriptionId = merge.request.readUInt32BE(8);
    const unsubscribe = merge.kind === SubscriptionKind.UNSUBSCRIBE;
    const held = s.subscriptions.has(subscriptionId);
    if (unsubscribe) s.subscriptions.remove(subscriptionId);
    else if (merge.succeeded) s.subscriptions.accept(subscriptionId, merge.request);
    // An upstream that came up (added, or back) while this change was in flight got a
    // replay of the subscriptions as they were then: without the change. It gets it now.
    if (unsubscribe ? held : merge.succeeded)
      for (const link of s.links.values())
        if (link.state === "open" && merge.reachedUp.get(link) !== link.ups)
          link.send(s.subscriptions.resend(link, merge.request));
  }
  s.client.send(reply);
}
