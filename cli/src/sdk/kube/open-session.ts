// The whole way from "I want a session on deployment/myapp" to a connected SessionClient:
// read the operator (mode, router endpoint, default namespace), create and await the
// session's database branches (session-branches.ts), create the session object with the
// user's credentials (the branches and SQS queue splits in its connectParams), wait until
// it is Ready — and each queue split Splitting — while reporting per-cluster and per-split
// progress, connect to a router and say Hello. Anything failing on the way deletes what it
// made again, so a failed start leaves nothing behind.
// `Session.close()` disconnects, deletes the session, then the branches made for it.
import type { KubeConfig } from "@kubernetes/client-node";
import type {
  QueueSplitStatus,
  SqsQueueSplit,
  SwitchyardOperator,
} from "../../../../proto/api/v1alpha1/index.js";
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
import { queueRewrites, readyQueues, type ReadyQueueSplit } from "./session-queues.js";
import type { EnvQueueRewrite } from "../session/session-requests.js";

/** The feature an install advertises when its control planes split SQS queues. */
export const SQS_FEATURE = "SqsQueueSplitting";

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
  /** SQS queue splits (connectParams.sqsSplit); the start also waits for each to be Splitting. */
  queues?: readonly SqsQueueSplit[];
  /** Each change of a queue split's phase, reason or message, once. */
  onQueueProgress?: (q: QueueSplitStatus) => void;
  /** The QueueSplitOverlap condition's message, once, when the session carries it. */
  onQueueOverlap?: (message: string) => void;
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
    /** Splitting queue splits: where each split variable points for the local process. */
    readonly queues: readonly ReadyQueueSplit[] = [],
  ) {}

  get id(): string {
    return this.handle.id;
  }

  /** The EnvGet rewrites (`client.env({ queues })`) pointing each split variable at its output queue. */
  queueRewrites(): EnvQueueRewrite[] {
    return queueRewrites(this.queues);
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
  const splits = o.queues ?? [];
  // Workload clusters split queues. In single-cluster mode that is this operator; a Primary
  // forwards splits to its members whatever it advertises itself (a management-only one
  // never does), and a member that does not split is seen by its split never reporting.
  if (
    splits.length > 0 &&
    mode === "single-cluster" &&
    !operator.status?.supportedFeatures?.includes(SQS_FEATURE)
  )
    throw new CliError(
      CliErrorCode.FEATURE_UNAVAILABLE,
      `this Switchyard install does not split SQS queues (its SwitchyardOperator does not list ${SQS_FEATURE}): ` +
        "install the chart with queues.sqs.enabled=true, or remove queues from switchyard.json",
    );
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
  const withBranches = branches.length
    ? {
        ...o.connectParams,
        databaseBranches: [...(o.connectParams?.databaseBranches ?? []), ...branchRefs(branches)],
      }
    : o.connectParams;
  const connectParams = splits.length
    ? { ...withBranches, sqsSplit: [...(withBranches?.sqsSplit ?? []), ...splits] }
    : withBranches;
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
    const onQueues = queueReporter(o);
    const progress = await kube.waitReady(
      handle,
      {
        ...(o.signal ? { signal: o.signal } : {}),
        ...(o.readyTimeoutMs !== undefined ? { timeoutMs: o.readyTimeoutMs } : {}),
        onProgress: (p) => {
          onQueues(p);
          o.onProgress?.(p);
        },
        queues: splits.map((q) => q.queueId),
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
    const queues = readyQueues(progress.queues, splits);
    return new Session(handle, client, operator, progress, kube, branches, o.kubeConfig, queues);
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

/** Reports each queue split's changes once, and the overlap warning once. */
function queueReporter(o: OpenSessionOptions): (p: SessionProgress) => void {
  const last = new Map<string, string>();
  let warned = false;
  return (p) => {
    for (const q of p.queues ?? []) {
      const key = JSON.stringify([q.phase, q.reason, q.message]);
      if (last.get(q.queueId) === key) continue;
      last.set(q.queueId, key);
      o.onQueueProgress?.(q);
    }
    if (p.overlap && !warned) {
      warned = true;
      o.onQueueOverlap?.(p.overlap);
    }
  };
}
