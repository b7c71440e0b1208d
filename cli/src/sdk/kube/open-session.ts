// The whole way from "I want a session on deployment/myapp" to a connected SessionClient:
// read the operator (mode, router endpoint, default namespace), create and await the
// session's database branches (session-branches.ts), create the session object with the
// user's credentials (the branches in its connectParams), wait until it is Ready while
// reporting per-cluster progress, connect to a router and say Hello. Anything failing on
// the way deletes what it made again, so a failed start leaves nothing behind.
// `Session.close()` disconnects, deletes the session, then the branches made for it.
import type { KubeConfig } from "@kubernetes/client-node";
import type { SwitchyardOperator } from "../../../../proto/api/v1alpha1/index.js";
import { sessionKey, sessionUrl } from "../../../../proto/session-endpoint.js";
import { CliError, CliErrorCode } from "../cli-errors.js";
import { contextNamespace } from "./kube-access.js";
import {
  KubeSessions,
  newSessionName,
  type SessionHandle,
  type SessionProgress,
  type SessionRequest,
} from "./kube-sessions.js";
import { normalizeRouterUrl, readOperator, routerBaseUrl, sessionModeOf } from "./operator-info.js";
import { SessionClient, type SessionClientOptions } from "../session/session-client.js";
import type { BranchRequest } from "../local/branch-config.js";
import type { BranchProgress } from "./branch-wait.js";
import type { BranchHandle, ReadyBranch } from "./kube-branches.js";
import { branchRefs, prepareBranches, releaseBranches } from "./session-branches.js";

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
  /** Database branches created (or shared ones reused) before the session, awaited until Ready. */
  branches?: readonly BranchRequest[];
  /** How long to wait for every branch to be Ready, ms (default 120 000). */
  branchTimeoutMs?: number;
  /** Each branch once its CR exists (created, or reused when shared). */
  onBranch?: (h: BranchHandle, reused: boolean) => void;
  onBranchProgress?: (p: BranchProgress) => void;
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
    /** Ready branches with their credentials (never log them). */
    readonly branches: readonly ReadyBranch[] = [],
    private readonly kubeConfig?: KubeConfig,
  ) {}

  get id(): string {
    return this.handle.id;
  }

  /**
   * Disconnects, deletes the session object, then the branches made for this session only
   * (idempotent). After trying both, throws an error saying what could not be deleted.
   */
  async close(reason = "client closed"): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.client.close(reason);
    const problems: string[] = [];
    await this.kube.delete(this.handle).catch((err: unknown) => {
      problems.push(`could not delete session ${this.id}: ${(err as Error).message} (it expires by TTL)`);
    });
    if (this.kubeConfig)
      await releaseBranches(this.kubeConfig, this.branches).catch((err: unknown) => {
        problems.push((err as Error).message);
      });
    if (problems.length > 0) throw new CliError(CliErrorCode.KUBE_API, problems.join("; "));
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
  const name = newSessionName(mode);
  const branches = await prepareBranches(o.kubeConfig, o.branches ?? [], {
    namespace,
    sessionName: name,
    timeoutMs: o.branchTimeoutMs ?? 120_000,
    ...(o.signal ? { signal: o.signal } : {}),
    ...(o.onBranch ? { onBranch: o.onBranch } : {}),
    ...(o.onBranchProgress ? { onProgress: o.onBranchProgress } : {}),
  });
  const connectParams = branches.length
    ? {
        ...o.connectParams,
        databaseBranches: [...(o.connectParams?.databaseBranches ?? []), ...branchRefs(branches)],
      }
    : o.connectParams;
  let handle: SessionHandle;
  try {
    handle = await kube.create(
      {
        target: o.target,
        namespace,
        name,
        ...(o.ttlSeconds !== undefined ? { ttlSeconds: o.ttlSeconds } : {}),
        ...(o.failurePolicy ? { failurePolicy: o.failurePolicy } : {}),
        ...(connectParams ? { connectParams } : {}),
      },
      operator,
    );
  } catch (err) {
    await releaseBranches(o.kubeConfig, branches).catch(() => {});
    throw err;
  }
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
    return new Session(handle, client, operator, progress, kube, branches, o.kubeConfig);
  } catch (err) {
    await kube.delete(handle).catch(() => {});
    await releaseBranches(o.kubeConfig, branches).catch(() => {});
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
