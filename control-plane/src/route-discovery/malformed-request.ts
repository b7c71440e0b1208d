// A router's message that is not a DiscoveryRequest (bytes protobuf cannot decode as one).
// grpc-js would end such a stream itself with a bare INTERNAL "Error deserializing request",
// uncounted and naming nothing; instead the request decoder hands the stream server a
// marker carrying why, and the server ends the stream with INVALID_ARGUMENT and counts it
// like any other protocol violation.
import type { DiscoveryRequest__Output } from "../../../proto/route-discovery-service.js";

const MALFORMED = Symbol("malformed DiscoveryRequest");

type Marker = DiscoveryRequest__Output & { [MALFORMED]: string };

/** Why `req` did not decode, or undefined for a decoded request. */
export function malformedReason(req: DiscoveryRequest__Output): string | undefined {
  return (req as Partial<Marker>)[MALFORMED];
}

/** Wraps a request decoder so that undecodable bytes become a marker instead of an exception. */
export function tolerantDecoder(
  decode: (bytes: Buffer) => DiscoveryRequest__Output,
): (bytes: Buffer) => DiscoveryRequest__Output {
  return (bytes) => {
    try {
      return decode(bytes);
    } catch (err) {
      const why = (err instanceof Error ? err.message : String(err)).slice(0, 200);
      return { [MALFORMED]: why } as Marker;
    }
  };
}
