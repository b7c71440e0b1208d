// Which protobuf message each (family, kind) pair carries. The single source the codec
// uses to validate kinds and to decode payloads for the agent and client; routers only
// use it to know which kinds exist (they never decode data-path payloads).
import type { DescMessage } from "@bufbuild/protobuf";
import * as pb from "./gen/session_pb.js";

const F = pb.FrameFamily;

const entries: ReadonlyArray<readonly [pb.FrameFamily, number, DescMessage]> = [
  [F.CONTROL, pb.ControlKind.HELLO, pb.HelloSchema],
  [F.CONTROL, pb.ControlKind.CLOSE, pb.CloseSchema],
  [F.CONTROL, pb.ControlKind.LOG_LEVEL, pb.LogLevelSchema],
  [F.CONTROL, pb.ControlKind.HELLO_ACK, pb.HelloAckSchema],
  [F.CONTROL, pb.ControlKind.ERROR, pb.ProtocolErrorSchema],
  [F.CONTROL, pb.ControlKind.UPSTREAM_STATUS, pb.UpstreamStatusSchema],
  [F.CONTROL, pb.ControlKind.LOG, pb.LogSchema],
  [F.PING, pb.PingKind.PING, pb.PingSchema],
  [F.PING, pb.PingKind.PONG, pb.PongSchema],
  [F.ENV, pb.EnvKind.GET, pb.EnvGetSchema],
  [F.ENV, pb.EnvKind.RESULT, pb.EnvResultSchema],
  [F.FILE, pb.FileKind.OPEN, pb.FileOpenSchema],
  [F.FILE, pb.FileKind.READ, pb.FileReadSchema],
  [F.FILE, pb.FileKind.READ_DIR, pb.FileReadDirSchema],
  [F.FILE, pb.FileKind.STAT, pb.FileStatSchema],
  [F.FILE, pb.FileKind.CLOSE, pb.FileCloseSchema],
  [F.FILE, pb.FileKind.MOUNTS, pb.FileMountsSchema],
  [F.FILE, pb.FileKind.RESULT, pb.FileResultSchema],
  [F.DNS, pb.DnsKind.GETADDRINFO, pb.DnsGetAddrInfoSchema],
  [F.DNS, pb.DnsKind.REVERSE, pb.DnsReverseSchema],
  [F.DNS, pb.DnsKind.RESULT, pb.DnsResultSchema],
  [F.OUTGOING_TCP, pb.OutgoingKind.CONNECT, pb.TcpConnectSchema],
  [F.OUTGOING_TCP, pb.OutgoingKind.DATA, pb.StreamDataSchema],
  [F.OUTGOING_TCP, pb.OutgoingKind.CLOSE, pb.StreamCloseSchema],
  [F.OUTGOING_TCP, pb.OutgoingKind.CONNECT_RESULT, pb.ConnectResultSchema],
  [F.OUTGOING_UDP, pb.OutgoingKind.CONNECT, pb.UdpBindSchema],
  [F.OUTGOING_UDP, pb.OutgoingKind.DATA, pb.UdpDatagramSchema],
  [F.OUTGOING_UDP, pb.OutgoingKind.CLOSE, pb.StreamCloseSchema],
  [F.OUTGOING_UDP, pb.OutgoingKind.CONNECT_RESULT, pb.ConnectResultSchema],
  [F.SUBSCRIPTION, pb.SubscriptionKind.MIRROR, pb.SubscribeSchema],
  [F.SUBSCRIPTION, pb.SubscriptionKind.STEAL, pb.SubscribeSchema],
  [F.SUBSCRIPTION, pb.SubscriptionKind.UNSUBSCRIBE, pb.UnsubscribeSchema],
  [F.SUBSCRIPTION, pb.SubscriptionKind.RESULT, pb.SubscriptionResultSchema],
  [F.TRAFFIC, pb.TrafficKind.DATA, pb.StreamDataSchema],
  [F.TRAFFIC, pb.TrafficKind.CLOSE, pb.StreamCloseSchema],
  [F.TRAFFIC, pb.TrafficKind.HTTP_RESPONSE, pb.HttpResponseSchema],
  [F.TRAFFIC, pb.TrafficKind.HTTP_RESPONSE_END, pb.HttpBodyEndSchema],
  [F.TRAFFIC, pb.TrafficKind.NEW_CONNECTION, pb.NewConnectionSchema],
  [F.TRAFFIC, pb.TrafficKind.HTTP_REQUEST, pb.HttpRequestSchema],
  [F.TRAFFIC, pb.TrafficKind.HTTP_REQUEST_END, pb.HttpBodyEndSchema],
];

/** Highest family number in use; bytes above it are unknown families. */
export const MAX_FAMILY = F.TRAFFIC;

const schemas = new Map<number, DescMessage>();
/** known[family * 256 + kind] === 1 for every pair in the catalog: one array read on the hot path. */
const known = new Uint8Array((MAX_FAMILY + 1) * 256);
for (const [family, kind, schema] of entries) {
  schemas.set(family * 256 + kind, schema);
  known[family * 256 + kind] = 1;
}

export function isKnownFamily(family: number): boolean {
  return family > 0 && family <= MAX_FAMILY;
}

export function isKnownKind(family: number, kind: number): boolean {
  return family > 0 && family <= MAX_FAMILY && known[family * 256 + kind] === 1;
}

/** The payload message of a (family, kind) pair, or undefined for an unknown pair. */
export function payloadSchemaOf(family: number, kind: number): DescMessage | undefined {
  return schemas.get(family * 256 + kind);
}

/** Every known (family, kind, schema) triple, for tests and generators. */
export function catalogEntries(): ReadonlyArray<readonly [number, number, DescMessage]> {
  return entries;
}

/** Families only the session's Default upstream answers (env, files, DNS, outgoing): DESIGN §5. */
export const DEFAULT_ONLY_FAMILIES: ReadonlySet<number> = new Set([
  F.ENV,
  F.FILE,
  F.DNS,
  F.OUTGOING_TCP,
  F.OUTGOING_UDP,
]);
