// Protocol version negotiation for the Hello/HelloAck exchange on every hop.
// Each side announces an inclusive [min, max] range; both continue with the highest
// version in both ranges, or the accepting side refuses with a ProtocolError.

/**
 * Versions this code base speaks. Bump MAX when adding frames; raise MIN when dropping old ones.
 * 2: stolen HTTP bodies may stream (HttpRequest/HttpResponse `body_streamed`, then DATA frames
 * and HTTP_REQUEST_END / HTTP_RESPONSE_END). Every hop must speak it, since an agent cannot
 * tell what the client behind its router speaks: version 1 is no longer accepted.
 */
export const PROTOCOL_VERSION_MIN = 2;
export const PROTOCOL_VERSION_MAX = 2;

export interface VersionRange {
  min: number;
  max: number;
}

/** The highest version in both ranges, or undefined when they do not overlap (or a range is empty). */
export function negotiateVersion(local: VersionRange, remote: VersionRange): number | undefined {
  if (local.min > local.max || remote.min > remote.max) return undefined;
  const high = Math.min(local.max, remote.max);
  const low = Math.max(local.min, remote.min);
  return high >= low ? high : undefined;
}
