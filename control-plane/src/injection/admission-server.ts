// The mutating admission webhook that gives opted-in pods the agent at birth (POST
// /inject-agent, AdmissionReview admission.k8s.io/v1, HTTPS with the chart's TLS Secret). It
// never denies a pod: whatever goes wrong — a malformed review aside, which gets a 400 naming
// what is wrong — the pod is allowed as it is, with a warning where its creator should know.
// The chart registers it with failurePolicy Ignore, so Switchyard being down never blocks pods
// either. Every control-plane replica serves it (nothing here needs the leader).
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { Counter, type Registry } from "prom-client";
import type { InjectionPolicy } from "./injection-policy.js";

export const INJECTION_PATH = "/inject-agent";
/** The largest review read (a pod spec with every env var and volume still fits many times over). */
const MAX_BODY_BYTES = 3 * 1024 * 1024;

export interface AdmissionServerOptions {
  policy: InjectionPolicy;
  tls: { certPem: string; keyPem: string };
  host: string;
  port: number;
  registry?: Registry;
  logger?: Logger;
}

interface AdmissionRequest {
  uid: string;
  kind?: { kind?: string };
  operation?: string;
  namespace?: string;
  dryRun?: boolean;
  object?: V1Pod;
}

export class AdmissionServer {
  readonly #server: Server;
  readonly #o: AdmissionServerOptions;
  readonly #admissions: Counter<"result"> | undefined;

  constructor(o: AdmissionServerOptions) {
    this.#o = o;
    this.#server = createServer(
      { cert: o.tls.certPem, key: o.tls.keyPem },
      (req, res) => void this.#handle(req, res),
    );
    this.#admissions = o.registry
      ? new Counter({
          name: "switchyard_injection_admissions_total",
          help: "Pods the admission webhook reviewed, by result: injected (born with the agent), skipped, error (allowed as they are).",
          labelNames: ["result"],
          registers: [o.registry],
        })
      : undefined;
  }

  /** Listens; resolves with the bound port. */
  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#server.once("error", reject);
      this.#server.listen(this.#o.port, this.#o.host, () => {
        const a = this.#server.address();
        resolve(typeof a === "object" && a ? a.port : this.#o.port);
      });
    });
  }

  /** Serves new connections with a renewed certificate (those open keep theirs). */
  setTls(tls: { certPem: string; keyPem: string }): void {
    this.#server.setSecureContext({ cert: tls.certPem, key: tls.keyPem });
  }

  close(): Promise<void> {
    this.#server.closeAllConnections?.();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    };
    if (req.method !== "POST" || req.url?.split("?")[0] !== INJECTION_PATH)
      return reply(404, { error: `POST an AdmissionReview to ${INJECTION_PATH}` });
    let request: AdmissionRequest;
    try {
      const review = JSON.parse(await readBody(req)) as {
        apiVersion?: string;
        kind?: string;
        request?: AdmissionRequest;
      };
      if (
        review.kind !== "AdmissionReview" ||
        review.apiVersion !== "admission.k8s.io/v1" ||
        !review.request?.uid
      )
        throw new Error("expected an admission.k8s.io/v1 AdmissionReview with request.uid");
      request = review.request;
    } catch (err) {
      return reply(400, { error: `malformed AdmissionReview: ${(err as Error).message}` });
    }
    const response: Record<string, unknown> = { uid: request.uid, allowed: true };
    try {
      if (
        request.kind?.kind === "Pod" &&
        request.operation === "CREATE" &&
        request.object &&
        request.namespace
      ) {
        const d = await this.#o.policy.decide(request.object, request.namespace, request.dryRun === true);
        if (d.inject) {
          response.patchType = "JSONPatch";
          response.patch = Buffer.from(JSON.stringify(d.patch)).toString("base64");
          this.#admissions?.inc({ result: "injected" });
          this.#o.logger?.info({ target: d.target }, "a pod is born with the agent");
        } else {
          if (d.warning) response.warnings = [d.warning];
          this.#admissions?.inc({ result: "skipped" });
        }
      } else this.#admissions?.inc({ result: "skipped" });
    } catch (err) {
      // Allowed as it is: the pod must not wait for Switchyard, and a session can still patch the template.
      this.#admissions?.inc({ result: "error" });
      this.#o.logger?.warn(
        { err: (err as Error).message, namespace: request.namespace },
        "could not give a pod the agent",
      );
      response.warnings = [
        `switchyard: the pod starts without the agent: ${(err as Error).message}`.slice(0, 500),
      ];
    }
    reply(200, { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response });
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Error(`body over ${MAX_BODY_BYTES} bytes`));
        req.destroy();
      } else chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}
