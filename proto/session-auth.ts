// How each hop of a session proves itself to the next (DESIGN §6): the dialer sends a
// random secret as `Authorization: Bearer <secret>` on the WebSocket upgrade; the
// receiving side stores only sha256(secret) in lowercase hex (in a CR spec, a routing
// table or a secrets file) and compares in constant time. The secret is never stored
// or logged by the receiving side.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";

/** sha256 of a secret, lowercase hex: what CR specs and routing tables carry. */
export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret, "utf8").digest("hex");
}

/** A fresh random secret (32 bytes, base64url). */
export function newSecret(): string {
  return randomBytes(32).toString("base64url");
}

/** True for a well-formed stored hash: 64 lowercase hex characters. */
export const isSecretHash = (s: string): boolean => /^[0-9a-f]{64}$/.test(s);

/** Constant-time check of a presented secret against a stored lowercase-hex sha256. */
export function secretMatches(secret: string, storedHash: string): boolean {
  const presented = createHash("sha256").update(secret, "utf8").digest();
  const stored = Buffer.from(storedHash, "hex");
  return stored.length === presented.length && timingSafeEqual(presented, stored);
}

/** The header a dialer sends. */
export function bearerHeader(secret: string): { authorization: string } {
  return { authorization: `Bearer ${secret}` };
}

/** The bearer secret of an upgrade request, or undefined when absent or malformed. */
export function bearerSecret(headers: IncomingHttpHeaders): string | undefined {
  const h = headers.authorization;
  if (typeof h !== "string") return undefined;
  return /^Bearer[ ]+(\S+)\s*$/i.exec(h)?.[1];
}
