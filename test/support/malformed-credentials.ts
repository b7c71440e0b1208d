// Malformed remote-cluster credentials for the fuzz suites: PEM certificates and keys
// truncated, missing a line, wrapped in the wrong armour, base64-encoded twice, swapped, of
// another pair or expired; bearer tokens that are not JWTs or carry no usable claims; Secret
// values cut mid-way. A canary sits in the secret bytes (key bodies, token signatures, junk),
// never in what is not secret (token claims, certificates' subjects), so a suite can check
// that no error, log line or status ever carries it.
import fc from "fast-check";
import type { KeyPairPem } from "../env/pki.js";

export const CANARY = "CANARY7f3a9c";
const b64 = (s: string) => Buffer.from(s).toString("base64");
const b64url = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");

/** The certificates and keys the arbitraries mangle (issued by one CA; `expired` has lapsed). */
export interface CredentialMaterial {
  pair: KeyPairPem;
  other: KeyPairPem;
  expired: KeyPairPem;
  caPem: string;
}

/** The bytes a PEM document becomes when mangled the ways Secrets get mangled. */
export function manglePem(pem: string, how: number, cut: number): string {
  const lines = pem.trim().split("\n");
  switch (how % 8) {
    case 0:
      return pem.slice(0, Math.max(1, Math.floor((pem.length * (cut % 100)) / 100))); // truncated
    case 1:
      return lines.filter((_, i) => i !== 1 + (cut % Math.max(1, lines.length - 2))).join("\n"); // a line lost
    case 2:
      return `${lines[0]}\n${CANARY}${lines.slice(1).join("\n")}`; // garbage in the body
    case 3:
      return pem.replace(/-----(BEGIN|END) ([A-Z ]+)-----/g, "-----$1 $2 X-----"); // wrong armour
    case 4:
      return b64(pem); // base64 twice
    case 5:
      return pem.replace(/\n/g, "\r\n") + `\n${CANARY}`; // CRLF and trailing junk
    case 6:
      return lines.join(""); // newlines lost
    default:
      return `${CANARY}\n${pem}`; // junk before the armour
  }
}

/** Arbitraries of `tls.crt`, `tls.key` and bearer-token contents, and of their stored (base64) form. */
export function credentialArbitraries(m: CredentialMaterial) {
  const { pair, other, expired, caPem } = m;
  const nowS = Math.floor(Date.now() / 1000);
  const pemPart = (pick: () => string) =>
    fc
      .record({ how: fc.nat(), cut: fc.nat(), mangle: fc.boolean() })
      .map(({ how, cut, mangle }) => (mangle ? manglePem(pick(), how, cut) : pick()));

  const certArb = fc.oneof(
    pemPart(() => pair.certPem),
    pemPart(() => expired.certPem),
    pemPart(() => other.certPem),
    pemPart(() => caPem),
    pemPart(() => pair.keyPem), // a key where the certificate goes
    fc.constantFrom("", " ", `${CANARY}`, "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----"),
  );
  const keyArb = fc.oneof(
    pemPart(() => pair.keyPem),
    pemPart(() => other.keyPem),
    pemPart(() => expired.keyPem),
    pemPart(() => pair.certPem), // a certificate where the key goes
    fc.constantFrom(
      "",
      CANARY,
      `-----BEGIN ENCRYPTED PRIVATE KEY-----\n${b64(CANARY)}\n-----END ENCRYPTED PRIVATE KEY-----`,
      `-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\n${b64(CANARY)}\n-----END RSA PRIVATE KEY-----`,
    ),
  );

  const tokenArb = fc.oneof(
    fc.constantFrom(
      CANARY,
      `${CANARY}.${CANARY}`,
      `a.${CANARY}.c`,
      `${b64url({ alg: "none" })}.${b64url(null)}.${CANARY}`,
      `${b64url({ alg: "none" })}.${b64url([1, 2])}.${CANARY}`,
      `${b64url({ alg: "none" })}.${b64url("claims")}.${CANARY}`,
      `x.${b64url({ sub: "system:serviceaccount:sy:sa" })}.${CANARY}`, // no iat/exp: a legacy token
      `x.${b64url({ iat: 5, exp: 5, sub: "system:serviceaccount:sy:sa" })}.${CANARY}`,
      `x.${b64url({ iat: 1, exp: 2, sub: "nobody" })}.${CANARY}`,
      `x.${b64url({ iat: 1, exp: 2, "kubernetes.io": null })}.${CANARY}`,
      `x.${b64url({ iat: 1, exp: 2, "kubernetes.io": { namespace: 5, serviceaccount: "sa" } })}.${CANARY}`,
    ),
    fc
      .record({ iat: fc.integer({ min: -10, max: 10 }), life: fc.integer({ min: -100, max: 100 }) })
      .map(
        ({ iat, life }) =>
          `x.${b64url({ iat: nowS + iat * 3600, exp: nowS + (iat + life) * 3600, sub: "system:serviceaccount:sy:sa" })}.${CANARY}`,
      ),
    fc.string({ unit: "binary", maxLength: 30 }).map((s) => `${s}${CANARY}`),
  );

  /** A value as the API returns Secret data: base64 of the bytes, sometimes cut mid-way. */
  const stored = (arb: fc.Arbitrary<string>) =>
    fc
      .tuple(arb, fc.nat({ max: 9 }))
      .map(([v, cut]) => (cut === 0 ? b64(v).slice(0, Math.floor(b64(v).length / 2)) : b64(v)));
  return { certArb, keyArb, tokenArb, stored };
}
