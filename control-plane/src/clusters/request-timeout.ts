// A per-request deadline for client-node's generated APIs, which have none: past the
// deadline we destroy the request's agent (its sockets), so the call fails instead of
// hanging on a cluster whose API server stopped answering. One slow cluster then costs
// at most the timeout, never a stuck health loop.
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
        const timer = setTimeout(() => {
          const agent = request.getAgent() as { destroy?: () => void } | undefined;
          agent?.destroy?.();
          reject(new RemoteRequestTimeoutError(this.cluster, this.timeoutMs, request.getUrl()));
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
