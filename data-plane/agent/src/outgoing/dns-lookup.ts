// The DNS family: GETADDRINFO and REVERSE answered by the agent's own resolver
// (node:dns `lookup`, `reverse`), so names resolve from the agent's network position —
// in a sidecar, the target pod's DNS configuration. A failed lookup answers the resolver's
// error name (ENOTFOUND, …; EAI_FAIL when it gives none); a malformed request frame is a
// FrameError for the session to answer.
import { lookup, reverse } from "node:dns/promises";
import { decodePayload, encodeFrame } from "../../../../proto/frame-codec.js";
import { FrameError } from "../../../../proto/frame-errors.js";
import {
  DnsGetAddrInfoSchema,
  DnsKind,
  DnsResultSchema,
  DnsReverseSchema,
  FrameFamily,
} from "../../../../proto/gen/session_pb.js";

/** Answers one DNS request frame with a DnsResult through `send`. */
export async function answerDns(
  frame: Buffer,
  kind: number,
  requestId: number,
  send: (frame: Buffer) => void,
): Promise<void> {
  let init: { addresses?: { address: string; ipFamily: number }[]; hostnames?: string[]; error?: string };
  try {
    if (kind === DnsKind.GETADDRINFO) {
      const q = decodePayload(frame, DnsGetAddrInfoSchema);
      const family = q.ipFamily === 4 || q.ipFamily === 6 ? q.ipFamily : 0;
      const all = await lookup(q.host, { all: true, family });
      init = { addresses: all.map((a) => ({ address: a.address, ipFamily: a.family })) };
    } else {
      init = { hostnames: await reverse(decodePayload(frame, DnsReverseSchema).address) };
    }
  } catch (err) {
    if (err instanceof FrameError) throw err;
    const e = err as Error & { code?: string };
    init = { error: e.code ?? "EAI_FAIL" };
  }
  send(encodeFrame({ family: FrameFamily.DNS, kind: DnsKind.RESULT, requestId }, DnsResultSchema, init));
}
