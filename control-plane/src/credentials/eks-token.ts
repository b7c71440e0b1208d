// The bearer token EKS accepts: a SigV4-presigned STS GetCallerIdentity URL (regional
// endpoint) whose signature covers the header `x-k8s-aws-id: <cluster name>`, encoded
// base64url without padding and prefixed `k8s-aws-v1.`. The cluster's authenticator
// replays the URL against STS with that header; STS tells it which IAM principal signed
// it, and access entries map the principal to Kubernetes groups. Binding the cluster
// name into the signature stops a token minted for one cluster working on another.
import { Hash } from "@smithy/hash-node";
import { HttpRequest } from "@smithy/protocol-http";
import { SignatureV4 } from "@smithy/signature-v4";

/** AWS credentials as the default provider chain returns them. */
export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  /** When temporary credentials expire. */
  readonly expiration?: Date;
}

export const EKS_TOKEN_PREFIX = "k8s-aws-v1.";
export const EKS_CLUSTER_ID_HEADER = "x-k8s-aws-id";
/** How long the presigned URL is valid, in seconds (STS/EKS accept up to 15 minutes). */
export const EKS_TOKEN_URL_TTL_SECONDS = 900;

export interface EksTokenInput {
  /** The EKS cluster name as AWS spells it (the configuration key, not the label derived from it). */
  clusterName: string;
  region: string;
  credentials: AwsCredentials;
  /** Signing time (default now). */
  signingDate?: Date;
  /** URL validity in seconds (default 900). */
  expiresInSeconds?: number;
}

export function stsHostname(region: string): string {
  return region.startsWith("cn-") ? `sts.${region}.amazonaws.com.cn` : `sts.${region}.amazonaws.com`;
}

/** Presigns GetCallerIdentity and returns the EKS bearer token. */
export async function createEksToken(input: EksTokenInput): Promise<string> {
  const hostname = stsHostname(input.region);
  const signer = new SignatureV4({
    credentials: input.credentials,
    region: input.region,
    service: "sts",
    sha256: Hash.bind(null, "sha256"),
    applyChecksum: false,
  });
  const request = new HttpRequest({
    method: "GET",
    protocol: "https:",
    hostname,
    path: "/",
    query: { Action: "GetCallerIdentity", Version: "2011-06-15" },
    headers: { host: hostname, [EKS_CLUSTER_ID_HEADER]: input.clusterName },
  });
  const signed = await signer.presign(request, {
    signingDate: input.signingDate ?? new Date(),
    expiresIn: input.expiresInSeconds ?? EKS_TOKEN_URL_TTL_SECONDS,
  });
  const query = Object.entries(signed.query ?? {})
    .map(([k, v]) => `${rfc3986(k)}=${rfc3986(String(v))}`)
    .join("&");
  const url = `https://${hostname}/?${query}`;
  return EKS_TOKEN_PREFIX + Buffer.from(url, "utf8").toString("base64url");
}

function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}
