// A stand-in for the EKS authenticator, for tests: a kube-apiserver token webhook
// (TokenReview over HTTPS) that accepts `k8s-aws-v1.` tokens the way EKS does, except
// that instead of replaying the presigned URL to AWS STS it verifies the SigV4
// signature itself with the test's AWS credentials (an independent implementation on
// node:crypto, not the signer under test). It checks that the URL is an STS
// GetCallerIdentity call, that `x-k8s-aws-id` is a signed header and the signature
// holds with this cluster's id, and that X-Amz-Date + X-Amz-Expires has not passed; then
// maps the access key's IAM principal to Kubernetes groups like an access entry.
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type Server } from "node:https";
import { writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { createCertificateAuthority } from "../../env/index.js";

export interface EksWebhookIdentity {
  accessKeyId: string;
  secretAccessKey: string;
  /** IAM principal ARN STS would report. */
  arn: string;
  /** Kubernetes groups the access entry maps it to. */
  groups: string[];
}

export interface EksWebhookOptions {
  /** The cluster id every token must have signed in x-k8s-aws-id. */
  clusterId: string;
  identities: EksWebhookIdentity[];
  /** Clock skew tolerated for X-Amz-Date in the future, ms (default 5 min). */
  maxSkewMs?: number;
}

export interface EksWebhookReview {
  authenticated: boolean;
  reason: string;
  username?: string;
}

export interface EksTokenWebhook {
  url: string;
  /** Writes the kubeconfig-format file kube-apiserver's --authentication-token-webhook-config-file reads. */
  writeConfig(path: string): string;
  reviews: EksWebhookReview[];
  close(): Promise<void>;
}

const sha256hex = (s: string) => createHash("sha256").update(s).digest("hex");
const hmac = (key: Buffer | string, s: string) => createHmac("sha256", key).update(s).digest();
const rfc3986 = (s: string) =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** Verifies one token; returns the identity or the reason it is refused. */
export function verifyEksToken(
  token: string,
  options: EksWebhookOptions,
  now = Date.now(),
): { ok: true; identity: EksWebhookIdentity } | { ok: false; reason: string } {
  const prefix = "k8s-aws-v1.";
  if (!token.startsWith(prefix)) return { ok: false, reason: "not a k8s-aws-v1 token" };
  const b64 = token.slice(prefix.length);
  if (b64.includes("=")) return { ok: false, reason: "token must be base64url without padding" };
  let url: URL;
  try {
    url = new URL(Buffer.from(b64, "base64url").toString("utf8"));
  } catch {
    return { ok: false, reason: "token does not decode to a URL" };
  }
  if (url.protocol !== "https:") return { ok: false, reason: "URL is not https" };
  const host = url.hostname;
  const hostMatch = /^sts\.([a-z0-9-]+)\.amazonaws\.com$/.exec(host);
  if (!hostMatch || url.port !== "")
    return { ok: false, reason: `host ${host} is not a regional STS endpoint` };
  if (url.pathname !== "/") return { ok: false, reason: "path must be /" };
  const q = url.searchParams;
  const one = (k: string) => (q.getAll(k).length === 1 ? q.get(k)! : undefined);
  if (one("Action") !== "GetCallerIdentity") return { ok: false, reason: "Action is not GetCallerIdentity" };
  if (one("Version") !== "2011-06-15") return { ok: false, reason: "unexpected Version" };
  if (one("X-Amz-Algorithm") !== "AWS4-HMAC-SHA256")
    return { ok: false, reason: "unexpected X-Amz-Algorithm" };
  const credential = one("X-Amz-Credential")?.split("/");
  if (!credential || credential.length !== 5 || credential[3] !== "sts" || credential[4] !== "aws4_request")
    return { ok: false, reason: "malformed X-Amz-Credential" };
  const [akid, shortDate, region] = credential as [string, string, string];
  if (region !== hostMatch[1])
    return { ok: false, reason: "credential scope region differs from the endpoint" };
  const amzDate = one("X-Amz-Date");
  const m = amzDate ? /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate) : null;
  if (!m || amzDate!.slice(0, 8) !== shortDate) return { ok: false, reason: "malformed X-Amz-Date" };
  const signedAt = Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!);
  const expires = Number(one("X-Amz-Expires"));
  if (!Number.isInteger(expires) || expires <= 0 || expires > 900)
    return { ok: false, reason: "X-Amz-Expires must be 1..900" };
  if (now > signedAt + expires * 1000)
    return { ok: false, reason: "token expired (X-Amz-Date + X-Amz-Expires passed)" };
  if (signedAt > now + (options.maxSkewMs ?? 300_000))
    return { ok: false, reason: "X-Amz-Date is in the future" };
  const signedHeaders = one("X-Amz-SignedHeaders")?.split(";") ?? [];
  if (!signedHeaders.includes("x-k8s-aws-id"))
    return { ok: false, reason: "x-k8s-aws-id is not a signed header" };
  if (!signedHeaders.includes("host")) return { ok: false, reason: "host is not a signed header" };
  const headerValues: Record<string, string> = { host, "x-k8s-aws-id": options.clusterId };
  for (const h of signedHeaders)
    if (!(h in headerValues)) return { ok: false, reason: `unexpected signed header ${h}` };
  const signature = one("X-Amz-Signature");
  if (!signature || !/^[0-9a-f]{64}$/.test(signature))
    return { ok: false, reason: "malformed X-Amz-Signature" };
  const identity = options.identities.find((i) => i.accessKeyId === akid);
  if (!identity) return { ok: false, reason: "unknown access key (STS would refuse it)" };

  const canonicalQuery = [...q.entries()]
    .filter(([k]) => k !== "X-Amz-Signature")
    .map(([k, v]) => [rfc3986(k), rfc3986(v)] as const)
    .sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&");
  const sorted = [...signedHeaders].sort();
  const canonicalRequest = [
    "GET",
    "/",
    canonicalQuery,
    sorted.map((h) => `${h}:${headerValues[h]}\n`).join(""),
    sorted.join(";"),
    sha256hex(""),
  ].join("\n");
  const scope = `${shortDate}/${region}/sts/aws4_request`;
  const stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256hex(canonicalRequest)].join("\n");
  const kDate = hmac(`AWS4${identity.secretAccessKey}`, shortDate);
  const kSigning = hmac(hmac(hmac(kDate, region), "sts"), "aws4_request");
  const expected = hmac(kSigning, stringToSign);
  if (!timingSafeEqual(expected, Buffer.from(signature, "hex")))
    return {
      ok: false,
      reason: "signature does not match (tampered, wrong secret, or signed for another cluster)",
    };
  return { ok: true, identity };
}

export async function startEksTokenWebhook(options: EksWebhookOptions): Promise<EksTokenWebhook> {
  const ca = await createCertificateAuthority("switchyard-test-eks-webhook-ca");
  const serving = await ca.issue({ commonName: "eks-webhook", usage: "server", ipAddresses: ["127.0.0.1"] });
  const reviews: EksWebhookReview[] = [];
  const server: Server = createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      let token = "";
      try {
        token = (JSON.parse(body) as { spec?: { token?: string } }).spec?.token ?? "";
      } catch {
        /* answered as unauthenticated below */
      }
      const v = verifyEksToken(token, options);
      const review: EksWebhookReview = v.ok
        ? { authenticated: true, reason: "ok", username: v.identity.arn }
        : { authenticated: false, reason: v.reason };
      reviews.push(review);
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          apiVersion: "authentication.k8s.io/v1",
          kind: "TokenReview",
          status: v.ok
            ? {
                authenticated: true,
                user: {
                  username: v.identity.arn,
                  uid: `aws-iam-authenticator:${v.identity.accessKeyId}`,
                  groups: v.identity.groups,
                },
              }
            : { authenticated: false, error: v.reason },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/authenticate`;
  return {
    url,
    reviews,
    writeConfig(path: string) {
      const b64 = Buffer.from(ca.certPem).toString("base64");
      writeFileSync(
        path,
        [
          "apiVersion: v1",
          "kind: Config",
          "clusters:",
          "  - name: eks-webhook",
          "    cluster:",
          `      server: ${url}`,
          `      certificate-authority-data: ${b64}`,
          "users:",
          "  - name: kube-apiserver",
          "    user: {}",
          "contexts:",
          "  - name: webhook",
          "    context: { cluster: eks-webhook, user: kube-apiserver }",
          "current-context: webhook",
          "",
        ].join("\n"),
      );
      return path;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
