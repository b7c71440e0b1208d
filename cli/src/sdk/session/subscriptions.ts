// The session's traffic subscriptions: mirror or steal of a target port (a steal may
// carry an HTTP filter) on every workload cluster. Each keeps its id for the session's
// life, so after a reconnect they are sent again under the same ids and connections the
// agents announce still name a subscription the client knows.
import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import * as pb from "../../../../proto/gen/session_pb.js";
import { decodePayload, FLAG_ERROR } from "../../../../proto/frame-codec.js";
import { ErrorCode } from "../../../../proto/error-codes.js";
import { CliError, CliErrorCode, RemoteError } from "../cli-errors.js";
import { toProtoFilter, type HttpFilterSpec } from "./http-filter.js";
import type { TrafficMode } from "./incoming-traffic.js";

export interface Subscription {
  id: number;
  port: number;
  mode: TrafficMode;
  filter?: HttpFilterSpec;
}

/** Sends one request and resolves with its reply frame (SessionClient.request). */
export type SendRequest = <S extends DescMessage>(
  family: number,
  kind: number,
  schema: S,
  init: MessageInitShape<S>,
  connectionId?: number,
) => Promise<Buffer>;

const F = pb.FrameFamily.SUBSCRIPTION;

export class SessionSubscriptions {
  readonly #active = new Map<number, Subscription>();
  #nextId = 1;

  constructor(private readonly request: SendRequest) {}

  get list(): Subscription[] {
    return [...this.#active.values()];
  }

  /** True when subscription `id` steals through an HTTP filter. */
  isFiltered(id: number): boolean {
    return this.#active.get(id)?.filter !== undefined;
  }

  /**
   * Mirrors or steals a target port on every workload cluster. Resolves once every live
   * cluster accepted; a refusal rejects with the clusters that refused.
   */
  async subscribe(port: number, mode: TrafficMode, filter?: HttpFilterSpec): Promise<Subscription> {
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new CliError(CliErrorCode.INVALID_OPTION, `port ${port} is not a TCP port (1-65535)`);
    if (filter && mode === "mirror")
      throw new CliError(CliErrorCode.INVALID_OPTION, "HTTP filters apply to steal only, not to mirror");
    const sub: Subscription = { id: this.#nextId++, port, mode, ...(filter ? { filter } : {}) };
    await this.#send(sub);
    this.#active.set(sub.id, sub);
    return sub;
  }

  async unsubscribe(sub: Subscription): Promise<void> {
    this.#active.delete(sub.id);
    await this.request(F, pb.SubscriptionKind.UNSUBSCRIBE, pb.UnsubscribeSchema, { port: sub.port }, sub.id);
  }

  /** Sends every subscription again (after a reconnect); refusals are reported, not thrown. */
  async resubscribeAll(): Promise<{ resubscribed: number; refused: string[] }> {
    const refused: string[] = [];
    let resubscribed = 0;
    for (const sub of this.#active.values()) {
      try {
        await this.#send(sub);
        resubscribed++;
      } catch (err) {
        refused.push(`${sub.mode} port ${sub.port}: ${(err as Error).message}`);
      }
    }
    return { resubscribed, refused };
  }

  clear(): void {
    this.#active.clear();
  }

  async #send(sub: Subscription): Promise<void> {
    const frame = await this.request(
      F,
      sub.mode === "mirror" ? pb.SubscriptionKind.MIRROR : pb.SubscriptionKind.STEAL,
      pb.SubscribeSchema,
      { port: sub.port, ...(sub.filter ? { httpFilter: toProtoFilter(sub.filter) } : {}) },
      sub.id,
    );
    const r = decodePayload(frame, pb.SubscriptionResultSchema);
    if (!r.ok || (frame[2]! & FLAG_ERROR) !== 0)
      throw new RemoteError(
        ErrorCode.SUBSCRIPTION_REFUSED,
        `${sub.mode} of port ${sub.port} was refused${r.refusedClusters.length ? ` by ${r.refusedClusters.join(", ")}` : ""}: ${r.error || "no reason given"}`,
        r.refusedClusters.join(","),
      );
  }
}
