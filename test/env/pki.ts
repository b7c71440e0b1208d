// Certificates for the test clusters: one CA per cluster, a serving certificate for
// its API server, client certificates for any user/groups (Kubernetes reads the
// user from CN and groups from O), and the ServiceAccount signing key pair.
// ECDSA P-256 everywhere: generation is fast and kube-apiserver accepts it.
import { webcrypto, createPublicKey, createPrivateKey, randomBytes } from "node:crypto";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

type CryptoKeyPair = webcrypto.CryptoKeyPair;

const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

export interface KeyPairPem {
  certPem: string;
  keyPem: string;
}

export interface CertificateAuthority extends KeyPairPem {
  /** Issues a leaf certificate signed by this CA. */
  issue(opts: LeafOptions): Promise<KeyPairPem>;
}

export interface LeafOptions {
  commonName: string;
  /** Subject O entries: Kubernetes groups for client certificates. */
  organizations?: string[];
  dnsNames?: string[];
  ipAddresses?: string[];
  usage: "server" | "client" | "both";
  /** Validity in seconds from now (default: one day). May be negative to mint an expired cert. */
  validForSeconds?: number;
  /** Start of validity, seconds relative to now (default: -60). */
  notBeforeOffsetSeconds?: number;
}

function toPem(kind: "PRIVATE KEY" | "PUBLIC KEY", der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString("base64");
  return `-----BEGIN ${kind}-----\n${b64.replace(/(.{64})/g, "$1\n").replace(/\n$/, "")}\n-----END ${kind}-----\n`;
}

async function newKeys(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
}

async function keyPem(keys: CryptoKeyPair): Promise<string> {
  return toPem("PRIVATE KEY", await webcrypto.subtle.exportKey("pkcs8", keys.privateKey));
}

function serial(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f; // keep it positive
  return bytes.toString("hex");
}

function dn(cn: string, orgs: string[] = []): string {
  const esc = (s: string) => s.replace(/([,+"\\<>;=])/g, "\\$1");
  return [`CN=${esc(cn)}`, ...orgs.map((o) => `O=${esc(o)}`)].join(", ");
}

export async function createCertificateAuthority(commonName: string): Promise<CertificateAuthority> {
  const keys = await newKeys();
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: dn(commonName),
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 10 * 365 * 86_400_000),
    keys,
    signingAlgorithm: alg,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const certPem = cert.toString("pem") + "\n";
  const caKeyPem = await keyPem(keys);

  return {
    certPem,
    keyPem: caKeyPem,
    async issue(opts: LeafOptions): Promise<KeyPairPem> {
      const leafKeys = await newKeys();
      const start = Date.now() + (opts.notBeforeOffsetSeconds ?? -60) * 1000;
      const end = Date.now() + (opts.validForSeconds ?? 86_400) * 1000;
      const ekus: string[] = [];
      if (opts.usage !== "client") ekus.push(x509.ExtendedKeyUsage.serverAuth);
      if (opts.usage !== "server") ekus.push(x509.ExtendedKeyUsage.clientAuth);
      const san = [
        ...(opts.dnsNames ?? []).map((value) => ({ type: "dns" as const, value })),
        ...(opts.ipAddresses ?? []).map((value) => ({ type: "ip" as const, value })),
      ];
      const extensions: x509.Extension[] = [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(
          x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment,
          true,
        ),
        new x509.ExtendedKeyUsageExtension(ekus, false),
        await x509.AuthorityKeyIdentifierExtension.create(keys.publicKey),
      ];
      if (san.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(san, false));
      const leaf = await x509.X509CertificateGenerator.create({
        serialNumber: serial(),
        subject: dn(opts.commonName, opts.organizations),
        issuer: cert.subject,
        notBefore: new Date(start),
        notAfter: new Date(end),
        publicKey: leafKeys.publicKey,
        signingKey: keys.privateKey,
        signingAlgorithm: alg,
        extensions,
      });
      return { certPem: leaf.toString("pem") + "\n", keyPem: await keyPem(leafKeys) };
    },
  };
}

/** A key pair for signing ServiceAccount tokens (private PEM for the API server, public for verification). */
export async function createServiceAccountSigningKey(): Promise<{ privatePem: string; publicPem: string }> {
  const keys = await newKeys();
  const privatePem = await keyPem(keys);
  const publicPem = createPublicKey(createPrivateKey(privatePem)).export({ type: "spki", format: "pem" });
  return { privatePem, publicPem: publicPem.toString() };
}
