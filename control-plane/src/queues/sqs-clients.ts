// This cluster's SQS clients: one per SQS endpoint that a queue URL names, so that a split
// whose output queue lives in another region (or on an ElasticMQ/LocalStack host) is written
// to where that queue is. An AWS queue URL (`https://sqs.<region>.amazonaws.com/…`,
// `https://<region>.queue.amazonaws.com/…`) gets a client of its region and AWS's endpoint;
// any other host gets a client whose endpoint is the URL's origin and whose region is the
// configured one (it signs with it). Credentials are the SDK's default chain (each cluster
// its own, DESIGN §7) unless given. Clients are chosen here, never by the SDK from a queue
// URL (`useQueueUrlAsEndpoint: false`), so every call goes where this module says.
import { SQSClient, type SQSClientConfig } from "@aws-sdk/client-sqs";
import { OptionError } from "../../../lib/option-error.js";

export interface SqsClientsOptions {
  /**
   * Region of this cluster's SQS and of queues on hosts that do not name one (an endpoint,
   * ElasticMQ, LocalStack). Default: the SDK's (AWS_REGION, the profile).
   */
  region?: string;
  /** This cluster's SQS endpoint, an http(s) URL (e.g. `http://elasticmq:9324`). Default: AWS's for the region. */
  endpoint?: string;
  /** Credentials or a provider. Default: the SDK's default credential chain. */
  credentials?: SQSClientConfig["credentials"];
}

/** Where one client sends: an AWS region (its own endpoint unless `endpoint`), or an endpoint. */
export interface SqsTarget {
  region: string | undefined;
  endpoint: string | undefined;
}

// sqs.<region>.amazonaws.com[.cn], <region>.queue.amazonaws.com[.cn], and the legacy
// queue.amazonaws.com (us-east-1): AWS's own endpoint of the region serves them all.
const AWS_STANDARD = [
  /^sqs\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$/,
  /^([a-z0-9-]+)\.queue\.amazonaws\.com(?:\.cn)?$/,
];
// FIPS and dual-stack hosts name their region but are not the region's default endpoint.
const AWS_OTHER = [/^sqs-fips\.([a-z0-9-]+)\.amazonaws\.com$/, /^sqs\.([a-z0-9-]+)\.api\.aws$/];

/** Which region and endpoint serve a queue URL, given the configured region. */
export function targetOf(url: string, region: string | undefined): SqsTarget {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new Error(
      `"${url}" is not a queue URL: give an http(s) URL such as https://sqs.<region>.amazonaws.com/<account>/<name>`,
    );
  }
  if (u.protocol !== "https:" && u.protocol !== "http:") throw new Error(`queue URL ${url} is not http(s)`);
  const host = u.hostname.toLowerCase();
  if (host === "queue.amazonaws.com") return { region: "us-east-1", endpoint: undefined };
  for (const re of AWS_STANDARD) {
    const m = re.exec(host);
    if (m) return { region: m[1], endpoint: undefined };
  }
  for (const re of AWS_OTHER) {
    const m = re.exec(host);
    if (m) return { region: m[1], endpoint: u.origin };
  }
  return { region, endpoint: u.origin };
}

/** The queue's name: the last segment of a URL's path, or the value itself when it is a name. */
export function queueNameOf(urlOrName: string): string {
  if (!/^https?:\/\//i.test(urlOrName)) return urlOrName;
  const segments = new URL(urlOrName).pathname.split("/").filter((s) => s !== "");
  const last = segments.at(-1);
  if (!last) throw new Error(`queue URL ${urlOrName} has no queue name in its path`);
  return decodeURIComponent(last);
}

/** FIFO queues' names end in `.fifo` (SQS requires it). */
export function isFifo(nameOrUrl: string): boolean {
  return queueNameOf(nameOrUrl).endsWith(".fifo");
}

export class SqsClients {
  readonly #region: string | undefined;
  readonly #endpoint: string | undefined;
  readonly #credentials: SQSClientConfig["credentials"];
  readonly #clients = new Map<string, SQSClient>();

  constructor(o: SqsClientsOptions = {}) {
    if (o.region !== undefined && !/^[a-z0-9-]+$/.test(o.region))
      throw new OptionError(
        "region",
        `must be an AWS region such as eu-west-1, got ${JSON.stringify(o.region)}`,
      );
    if (o.endpoint !== undefined) {
      let u: URL | undefined;
      try {
        u = new URL(o.endpoint);
      } catch {
        u = undefined;
      }
      if (!u || (u.protocol !== "http:" && u.protocol !== "https:"))
        throw new OptionError(
          "endpoint",
          `must be an http(s) URL such as http://elasticmq:9324, got ${JSON.stringify(o.endpoint)}`,
        );
    }
    this.#region = o.region;
    this.#endpoint = o.endpoint;
    this.#credentials = o.credentials;
  }

  /** The client for the SQS that serves this queue URL (cached per region and endpoint). */
  forQueue(url: string): SQSClient {
    return this.#client(targetOf(url, this.#region));
  }

  /** This cluster's own SQS: the configured endpoint, else AWS's of the configured region. */
  local(): SQSClient {
    if (this.#endpoint) return this.forQueue(this.#endpoint);
    return this.#client({ region: this.#region, endpoint: undefined });
  }

  /** Destroys every client made (their sockets close); later calls make new ones. */
  destroy(): void {
    for (const c of this.#clients.values()) c.destroy();
    this.#clients.clear();
  }

  #client(t: SqsTarget): SQSClient {
    const key = `${t.region ?? ""} ${t.endpoint ?? ""}`;
    let c = this.#clients.get(key);
    if (!c) {
      c = new SQSClient({
        ...(t.region ? { region: t.region } : {}),
        ...(t.endpoint ? { endpoint: t.endpoint } : {}),
        ...(this.#credentials ? { credentials: this.#credentials } : {}),
        useQueueUrlAsEndpoint: false,
      });
      this.#clients.set(key, c);
    }
    return c;
  }
}
