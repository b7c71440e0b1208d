// The SUBSCRIPTION family for one session: MIRROR, STEAL and UNSUBSCRIBE requests turned
// into PortSubscriptions rules for the target ports this agent owns, each answered with a
// SubscriptionResult (on refusal: ok=false, FLAG_ERROR, "<CODE>: <message>"). The client's
// subscription id (header connection id) is remembered per port so NEW_CONNECTION frames
// can name it. Protobuf HTTP filters become the port proxy's HttpFilter here, nesting
// bounded so a peer cannot make compilation recurse without limit.
import type { Logger } from "pino";
import { decodePayload, encodeFrame, FLAG_ERROR } from "../../../../proto/frame-codec.js";
import * as pb from "../../../../proto/gen/session_pb.js";
import { ErrorCode } from "../../../../proto/error-codes.js";
import { AgentError } from "../agent-errors.js";
import type { AgentCounters } from "../agent-metrics.js";
import { HttpFilterError, type HttpFilter } from "./http-filter.js";
import type { PortSubscriptions } from "./port-subscriptions.js";
import type { SessionTraffic } from "./session-traffic.js";

const MAX_FILTER_DEPTH = 8;

function toHttpFilter(f: pb.HttpFilter, depth = 0): HttpFilter {
  if (depth > MAX_FILTER_DEPTH)
    throw new HttpFilterError(`http_filter: filters nest deeper than ${MAX_FILTER_DEPTH} levels`);
  const v = f.filter;
  switch (v.case) {
    case "header":
      return { header: { name: v.value.name, valueRegex: v.value.valueRegex } };
    case "pathRegex":
      return { pathRegex: v.value };
    case "method":
      return { method: v.value };
    case "allOf":
      return { allOf: v.value.filters.map((x) => toHttpFilter(x, depth + 1)) };
    case "anyOf":
      return { anyOf: v.value.filters.map((x) => toHttpFilter(x, depth + 1)) };
    default:
      throw new HttpFilterError(
        "http_filter: a filter must set one of header, path_regex, method, all_of, any_of",
      );
  }
}

export interface SubscriptionRequestsOptions {
  sessionId: string;
  subscriptions: PortSubscriptions;
  /** Ports subscriptions may name (the target's ports). */
  ports: ReadonlySet<number>;
  traffic: SessionTraffic;
  counters: AgentCounters;
  log: Logger;
}

export class SubscriptionRequests {
  constructor(private readonly o: SubscriptionRequestsOptions) {}

  /**
   * Applies one subscription request and returns the encoded SubscriptionResult; an error
   * without a code (not a refusal) is thrown for the session to answer.
   */
  answer(frame: Buffer, kind: number, requestId: number, subscriptionId: number): Buffer {
    const { o } = this;
    const reply = (ok: boolean, error = ""): Buffer =>
      encodeFrame(
        {
          family: pb.FrameFamily.SUBSCRIPTION,
          kind: pb.SubscriptionKind.RESULT,
          requestId,
          connectionId: subscriptionId,
          flags: ok ? 0 : FLAG_ERROR,
        },
        pb.SubscriptionResultSchema,
        { ok, error },
      );
    if (kind === pb.SubscriptionKind.UNSUBSCRIBE) {
      const { port } = decodePayload(frame, pb.UnsubscribeSchema);
      o.subscriptions.unsubscribe(o.sessionId, port);
      o.traffic.subscriptionIds.delete(port);
      o.log.info({ port }, "unsubscribed");
      return reply(true);
    }
    const sub = decodePayload(frame, pb.SubscribeSchema);
    const mode = kind === pb.SubscriptionKind.MIRROR ? "mirror" : "steal";
    try {
      if (!o.ports.has(sub.port)) {
        throw new AgentError(
          ErrorCode.PORT_NOT_SERVED,
          `port ${sub.port} is not one of the target's ports this agent owns (${[...o.ports].join(", ") || "none"})`,
        );
      }
      const filter = sub.httpFilter ? toHttpFilter(sub.httpFilter) : undefined;
      // Set first: subscribing may hand held connections to this session at once.
      const ids = o.traffic.subscriptionIds;
      const previousId = ids.get(sub.port);
      ids.set(sub.port, subscriptionId);
      try {
        o.subscriptions.subscribe(o.sessionId, sub.port, mode, filter);
      } catch (err) {
        if (previousId === undefined) ids.delete(sub.port);
        else ids.set(sub.port, previousId);
        throw err;
      }
      o.log.info({ port: sub.port, mode, filtered: filter !== undefined }, "subscribed");
      return reply(true);
    } catch (err) {
      const e = err as Error & { code?: string };
      if (!e.code) throw err;
      o.counters.error(e.code);
      o.log.info({ port: sub.port, mode, code: e.code }, "subscription refused");
      return reply(false, `${e.code}: ${e.message}`);
    }
  }
}
