// The router's side of one RouteDiscovery push: checks that it carries a version and a
// nonce, applies it to the RouteSink (the routing table) as a RouteDelta, and answers it —
// an ACK naming the version now served, or a NACK that keeps the previous version and says
// why (bounded, logged, reported through onRejected). Holds the version last applied, which
// the client resends on every reconnect, and counts what it applied and refused.
import { create } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import { SessionRouteSchema, type SessionRoute } from "../../../proto/gen/route_discovery_pb.js";
import type { DiscoveryRequest, DiscoveryResponse__Output } from "../../../proto/route-discovery-service.js";

/** One push from the control plane, as the routing table must apply it. */
export interface RouteDelta {
  /** True: `upserts` is the complete table; drop every session not in it. */
  fullResync: boolean;
  upserts: SessionRoute[];
  removes: string[];
  version: string;
}

/** Where pushed tables go (the router's routing table). Throw to NACK; the message becomes the error detail. */
export interface RouteSink {
  apply(delta: RouteDelta): void;
}

export class RoutePushApplier {
  /** Version of the table last applied to the sink ("" before the first push). */
  version = "";
  applied = 0;
  rejected = 0;

  constructor(
    private readonly sink: RouteSink,
    private readonly log: Logger,
    private readonly onRejected: ((detail: string) => void) | undefined,
  ) {}

  /** Applies one push to the sink and returns its ACK or NACK. */
  apply(res: DiscoveryResponse__Output): DiscoveryRequest {
    const nack = (message: string): DiscoveryRequest => {
      this.rejected++;
      const detail = message.slice(0, 1024) || "rejected";
      // What a control plane sent may be anything: the log line stays bounded.
      this.log.warn(
        { version: res.versionInfo.slice(0, 256), nonce: res.nonce.slice(0, 64), err: detail },
        "routing push rejected (NACK)",
      );
      this.onRejected?.(detail);
      return { versionInfo: this.version, responseNonce: res.nonce, errorDetail: { message: detail } };
    };
    if (res.versionInfo === "") return nack("push carries no version_info");
    if (res.nonce === "") return nack("push carries no nonce");
    try {
      this.sink.apply({
        fullResync: res.fullSnapshot,
        upserts: res.upserts.map((u) => create(SessionRouteSchema, u)),
        removes: res.removes,
        version: res.versionInfo,
      });
    } catch (err) {
      return nack(err instanceof Error ? err.message : String(err));
    }
    this.version = res.versionInfo;
    this.applied++;
    return { versionInfo: res.versionInfo, responseNonce: res.nonce };
  }
}
