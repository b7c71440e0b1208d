// A per-request deadline for client-node's generated APIs, which have none: past the
// deadline we destroy the request (its socket), so the call fails instead of hanging on a
// cluster whose API server stopped answering. One slow cluster then costs at most the
// timeout, never a stuck health loop. Only that request's socket goes: the agent is shared
// by the cluster's other calls (connection-reuse.ts), which must not fail with it.
import type { Agent, ClientRequest } from "node:http";
import {
  IsomorphicFetchHttpLibrary,
  Observable,
  type HttpLibrary,
  type RequestContext,
  type ResponseContext,
} from "@kubernetes/client-node";

export class RemoteRequestTimeoutError extends Error {
  readonly code = "SWITCHYARD_REMOTE_REQUEST_TIMEOUT";
  constructor(
    readonly cluster: string,
    readonly timeoutMs: number,
    url: string,
  ) {
    super(`cluster "${cluster}": no answer from ${new URL(url).origin} within ${timeoutMs} ms`);
  }
}

export class TimeoutHttpLibrary implements HttpLibrary {
  private readonly inner = new IsomorphicFetchHttpLibrary();
  constructor(
    private readonly cluster: string,
    private readonly timeoutMs: number,
  ) {}

  send(request: RequestContext): Observable<ResponseContext> {
    return new Observable(
      new Promise<ResponseContext>((resolve, reject) => {
        let sent: ClientRequest | undefined;
        const agent = request.getAgent() as Agent | undefined;
        if (agent) request.setAgent(observingAgent(agent, (req) => (sent = req)));
        const timer = setTimeout(() => {
          const err = new RemoteRequestTimeoutError(this.cluster, this.timeoutMs, request.getUrl());
          sent?.destroy(err);
          reject(err);
        }, this.timeoutMs);
        this.inner
          .send(request)
          .toPromise()
          .then(
            (r) => {
              clearTimeout(timer);
              resolve(r);
            },
            (e: unknown) => {
              clearTimeout(timer);
              reject(e);
            },
          );
      }),
    );
  }
}

/** `agent` as it is, except that it tells `onRequest` which request it is handed (to end that one only). */
function observingAgent(agent: Agent, onRequest: (req: ClientRequest) => void): Agent {
  return new Proxy(agent, {
    get(target, prop) {
      if (prop === "addRequest")
        return (req: ClientRequest, options: unknown) => {
          onRequest(req);
          return (target as Agent & { addRequest(r: ClientRequest, o: unknown): void }).addRequest(
            req,
            options,
          );
        };
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
