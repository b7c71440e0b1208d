// How a client proves it may attach to a session: it sends the session secret as
// `Authorization: Bearer <secret>` on the WebSocket upgrade request; the router compares
// sha256(secret) (lowercase hex) with the route's client_key_hash in constant time.
// The secret itself is never stored or logged.
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";

/** The bearer secret of an upgrade request, or undefined when absent or malformed. */
export function bearerSecret(headers: IncomingHttpHeaders): string | undefined {
  const h = headers.authorization;
  if (typeof h !== "string") return undefined;
  const m = /^Bearer[ ]+(\S+)\s*$/i.exec(h);
  return m?.[1];
}

export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret, "utf8").digest("hex");
}

/** Constant-time check of a presented secret against a stored lowercase-hex sha256. */
export function secretMatches(secret: string, clientKeyHash: string): boolean {
  const presented = createHash("sha256").update(secret, "utf8").digest();
  const stored = Buffer.from(clientKeyHash, "hex");
  return stored.length === presented.length && timingSafeEqual(presented, stored);
}
