import { X509Certificate, createPrivateKey, createPublicKey, sign, verify } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createCertificateAuthority, createServiceAccountSigningKey } from "./pki.js";

describe("pki", () => {
  it("issues client certificates with the user in CN and groups in O, signed by the CA", async () => {
    const ca = await createCertificateAuthority("test-ca");
    const leaf = await ca.issue({ commonName: "alice", organizations: ["dev", "ops"], usage: "client" });
    const cert = new X509Certificate(leaf.certPem);
    const caCert = new X509Certificate(ca.certPem);
    expect(cert.subject).toContain("CN=alice");
    expect(cert.subject).toContain("O=dev");
    expect(cert.subject).toContain("O=ops");
    expect(cert.verify(caCert.publicKey)).toBe(true);
    expect(cert.checkIssued(caCert)).toBe(true);
    expect(caCert.ca).toBe(true);
    expect(cert.ca).toBe(false);
    // The key belongs to the certificate.
    expect(cert.checkPrivateKey(createPrivateKey(leaf.keyPem))).toBe(true);
  });

  it("puts DNS names and IPs in the serving certificate's SAN", async () => {
    const ca = await createCertificateAuthority("test-ca");
    const leaf = await ca.issue({
      commonName: "srv",
      usage: "server",
      dnsNames: ["localhost"],
      ipAddresses: ["127.0.0.1"],
    });
    const cert = new X509Certificate(leaf.certPem);
    expect(cert.checkHost("localhost")).toBe("localhost");
    expect(cert.checkIP("127.0.0.1")).toBe("127.0.0.1");
    expect(cert.checkIP("127.0.0.2")).toBeUndefined();
  });

  it("can mint an already expired certificate", async () => {
    const ca = await createCertificateAuthority("test-ca");
    const leaf = await ca.issue({
      commonName: "old",
      usage: "client",
      notBeforeOffsetSeconds: -7200,
      validForSeconds: -3600,
    });
    const cert = new X509Certificate(leaf.certPem);
    expect(new Date(cert.validTo).getTime()).toBeLessThan(Date.now());
  });

  it("makes a ServiceAccount signing key pair whose halves match", async () => {
    const { privatePem, publicPem } = await createServiceAccountSigningKey();
    const sig = sign("sha256", Buffer.from("x"), createPrivateKey(privatePem));
    expect(verify("sha256", Buffer.from("x"), createPublicKey(publicPem), sig)).toBe(true);
    expect(verify("sha256", Buffer.from("y"), createPublicKey(publicPem), sig)).toBe(false);
  });
});
