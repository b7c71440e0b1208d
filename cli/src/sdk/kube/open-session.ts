// The whole way from "I want a session on deployment/myapp" to a connected SessionClient:
// read the operator (mode, router endpoint, default namespace), create the session object
// with the user's credentials, wait until it is Ready while reporting per-cluster
// progress, connect to a router and say Hello. Anything failing on the way deletes the
// object again, so a failed start leaves nothing behind. `Session.close()` disconnects
// and deletes the session.
import type { KubeConfig } from "@kubernetes/client-node";
import type { SwitchyardOperator } from "../../../../proto/api/v1alpha1/index.js";
import { sessionKey, sessionUrl } from "../../../../proto/session-endpoint.js";
import { CliError, CliErrorCode } from "../cli-errors.js";
import { contextNamespace } from "./kube-access.js";
import {
  KubeSessions,
  type SessionHandle,
  type SessionProgress,
  type SessionRequest,
} from "./kube-sessions.js";
import { normalizeRouterUrl, readOperator, routerBaseUrl, sessionModeOf } from "./operator-info.js";
import { SessionClient, type SessionClientOptions } from "../session/session-client.js";

export interface OpenSessionOptions {
  kubeConfig: KubeConfig;
  target: string;
  /** Default: the context's namespace, else the operator's defaultNamespace, else "default". */
  namespace?: string;
  /** Router URLs overriding the operator's routerEndpoint (reconnects rotate through them). */
  routerUrls?: string[];
  routerCaPem?: string;
  ttlSeconds?: number;
  failurePolicy?: SessionRequest["failurePolicy"];
  connectParams?: SessionRequest["connectParams"];
  /** How long to wait for the session to become Ready, ms (default 120 000). */
  readyTimeoutMs?: number;
  onProgress?: (p: SessionProgress) => void;
  /** Called once the object exists (before it is ready): lets a caller clean up on Ctrl-C. */
  onCreated?: (h: SessionHandle) => void;
  signal?: AbortSignal;
  client?: Partial<Omit<SessionClientOptions, "sessionId" | "secret" | "urls" | "caPem">>;
}

export class Session {
  #closed = false;

  constructor(
    readonly handle: SessionHandle,
    readonly client: SessionClient,
    readonly operator: SwitchyardOperator,
    readonly progress: SessionProgress,
    private readonly kube: KubeSessions,
  ) {}

  get id(): string {
    return this.handle.id;
  }

  /** Disconnects and deletes the session object (idempotent). */
  async close(reason = "client closed"): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.client.close(reason);
    await this.kube.delete(this.handle);
  }
}

export function resolveNamespace(kc: KubeConfig, op: SwitchyardOperator | undefined, flag?: string): string {
  return flag ?? contextNamespace(kc) ?? op?.status?.defaultNamespace ?? "default";
}

export async function openSession(o: OpenSessionOptions): Promise<Session> {
  const operator = await readOperator(o.kubeConfig);
  const namespace = resolveNamespace(o.kubeConfig, operator, o.namespace);
  // Fail on a missing router endpoint before creating anything — except in single-cluster
  // mode, where the ClusterSession's own gateway (known once Ready) serves as well.
  const mode = sessionModeOf(operator);
  const override = o.routerUrls?.length ? o.routerUrls.map((u) => normalizeRouterUrl(u)) : undefined;
  const published = operator.status?.routerEndpoint ? routerBaseUrl(operator) : undefined;
  if (!override && !published && mode === "multi-cluster") routerBaseUrl(operator);
  const kube = new KubeSessions(o.kubeConfig);
  const handle = await kube.create(
    {
      target: o.target,
      namespace,
      ...(o.ttlSeconds !== undefined ? { ttlSeconds: o.ttlSeconds } : {}),
      ...(o.failurePolicy ? { failurePolicy: o.failurePolicy } : {}),
      ...(o.connectParams ? { connectParams: o.connectParams } : {}),
    },
    operator,
  );
  o.onCreated?.(handle);
  try {
    const progress = await kube.waitReady(
      handle,
      {
        ...(o.signal ? { signal: o.signal } : {}),
        ...(o.readyTimeoutMs !== undefined ? { timeoutMs: o.readyTimeoutMs } : {}),
        ...(o.onProgress ? { onProgress: o.onProgress } : {}),
      },
      operator.spec.clusterName,
    );
    const client = new SessionClient({
      ...o.client,
      sessionId: handle.id,
      secret: handle.secret,
      // Routers know a session by its key <namespace>:<name>, never by its name alone.
      urls: (override ?? (published ? [published] : [routerBaseUrl(undefined, progress.gateway)])).map((b) =>
        sessionUrl(b, sessionKey(handle.namespace, handle.id)),
      ),
      ...(o.routerCaPem ? { caPem: o.routerCaPem } : {}),
    });
    await client.connect(o.signal);
    return new Session(handle, client, operator, progress, kube);
  } catch (err) {
    await kube.delete(handle).catch(() => {});
    if (err instanceof CliError) throw err;
    throw new CliError(
      CliErrorCode.SESSION_FAILED,
      `session ${handle.id} could not start: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
}
