// Waiting for a session's database branches: each branch CR is read, then watched from
// that version until its phase is Ready or Failed (a watch that ends is re-read), all of
// them at once under one deadline. Each change of phase or condition message is reported
// once. The first Failed branch, a deleted one or the deadline ends the wait with an
// error naming the branch, its reason, and `branchTimeoutSeconds` on a timeout; then
// the Secret each Ready branch names is read for its credentials.
import { Watch, type KubeConfig } from "@kubernetes/client-node";
import { sleep } from "../../../../lib/abortable-sleep.js";
import {
  API_VERSION,
  BRANCH_ENGINES,
  type BranchCredentials,
  type BranchDatabase,
} from "../../../../proto/api/v1alpha1/index.js";
import { CliError, CliErrorCode } from "../cli-errors.js";
import { failureOf, type BranchHandle, type KubeBranches, type ReadyBranch } from "./kube-branches.js";

/** One line of progress: a branch's phase and what its conditions say. */
export interface BranchProgress {
  name: string;
  kind: BranchHandle["kind"];
  envVar: string;
  phase: string;
  reason?: string;
  message?: string;
}

export interface BranchWaitOptions {
  /** Give up after this many ms (the config's branchTimeoutSeconds × 1000). */
  timeoutMs: number;
  signal?: AbortSignal;
  onProgress?: (p: BranchProgress) => void;
  /** How often a Ready branch's missing Secret is read again, ms (default 250). */
  secretRetryMs?: number;
}

function progressOf(h: BranchHandle, b: BranchDatabase): BranchProgress {
  const phase = b.status?.phase ?? "Pending";
  const ready = b.status?.conditions?.find((c) => c.type === "Ready");
  const why = phase === "Failed" ? failureOf(b) : ready;
  return {
    name: h.name,
    kind: h.kind,
    envVar: h.envVar,
    phase,
    ...(why?.reason ? { reason: why.reason } : {}),
    ...(why?.message ? { message: why.message } : {}),
  };
}

const describe = (p: BranchProgress) =>
  `phase ${p.phase}${p.reason ? `, ${p.reason}` : ""}${p.message ? `: ${p.message}` : ""}`;

/** One watch of one object from `resourceVersion`: its events, until `stop` or it ends. */
function watchOnce(
  kc: KubeConfig,
  h: Pick<BranchHandle, "kind" | "name" | "namespace">,
  resourceVersion: string | undefined,
  onEvent: (type: string, obj: BranchDatabase) => boolean,
  stop: AbortSignal,
  maxMs: number,
): Promise<void> {
  return new Promise<void>((resolve) => {
    let ctl: AbortController | undefined;
    let finished = false;
    const timer = setTimeout(() => finish(), maxMs);
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      stop.removeEventListener("abort", finish);
      ctl?.abort();
      resolve();
    };
    stop.addEventListener("abort", finish, { once: true });
    const retry = () => void sleep(500, stop).then(finish);
    new Watch(kc)
      .watch(
        `/apis/${API_VERSION}/namespaces/${h.namespace}/${BRANCH_ENGINES[h.kind].plural}`,
        {
          fieldSelector: `metadata.name=${h.name}`,
          ...(resourceVersion ? { resourceVersion } : {}),
          allowWatchBookmarks: false,
        },
        (type, obj: BranchDatabase) => {
          if (onEvent(type, obj)) finish();
        },
        retry,
      )
      .then((c) => {
        // An open watch keeps the process alive: abort one that started late.
        ctl = c;
        if (finished) c.abort();
      }, retry);
  });
}

/**
 * Waits until every branch is Ready and its Secret readable; returns them with their
 * credentials, in the order given.
 */
export async function waitBranchesReady(
  kc: KubeConfig,
  branches: KubeBranches,
  handles: readonly BranchHandle[],
  o: BranchWaitOptions,
): Promise<ReadyBranch[]> {
  const deadline = Date.now() + o.timeoutMs;
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  o.signal?.addEventListener("abort", onAbort, { once: true });
  const last = new Map<string, BranchProgress>();
  const report = (h: BranchHandle, b: BranchDatabase): BranchProgress => {
    const p = progressOf(h, b);
    const key = `${h.kind}/${h.name}`;
    const before = last.get(key);
    if (!before || describe(before) !== describe(p)) o.onProgress?.(p);
    last.set(key, p);
    return p;
  };
  const timeout = (h: BranchHandle) => {
    const p = last.get(`${h.kind}/${h.name}`);
    return new CliError(
      CliErrorCode.BRANCH_TIMEOUT,
      `database branch ${h.name} (${h.kind} for ${h.envVar}) was not Ready after ${Math.round(o.timeoutMs / 1000)} s ` +
        `(${p ? describe(p) : "not read yet"}): raise branchTimeoutSeconds in switchyard.json if copying takes ` +
        `longer, or see \`switchyard branches status ${h.name}\` (is the branching controller running?)`,
    );
  };
  const gone = (h: BranchHandle) =>
    new CliError(
      CliErrorCode.BRANCH_NOT_FOUND,
      `database branch ${h.name} (${h.kind}) in namespace ${h.namespace} was deleted while the session waited for it; ` +
        "start the session again",
    );
  const failed = (h: BranchHandle, p: BranchProgress) =>
    new CliError(
      CliErrorCode.BRANCH_FAILED,
      `database branch ${h.name} (${h.kind} for ${h.envVar}) failed: ${p.reason ?? "no reason given"}` +
        `${p.message ? `: ${p.message}` : ""}. See \`switchyard branches status ${h.name}\`; once the cause is ` +
        `fixed, \`switchyard branches destroy ${h.name}\` and start the session again`,
    );

  const one = async (h: BranchHandle): Promise<BranchDatabase> => {
    for (;;) {
      if (stop.signal.aborted) throw new CliError(CliErrorCode.CLOSED, "interrupted");
      const cur = await branches.get(h.kind, h.name, h.namespace);
      if (!cur) throw gone(h);
      const p = report(h, cur);
      if (p.phase === "Ready") return cur;
      if (p.phase === "Failed") throw failed(h, p);
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw timeout(h);
      let verdict: BranchDatabase | "gone" | undefined;
      await watchOnce(
        kc,
        h,
        cur.metadata.resourceVersion,
        (type, obj) => {
          if (type === "DELETED") verdict = "gone";
          else if (type === "ADDED" || type === "MODIFIED") {
            const q = report(h, obj);
            if (q.phase === "Ready" || q.phase === "Failed") verdict = obj;
          }
          return verdict !== undefined;
        },
        stop.signal,
        Math.min(remaining, 30_000),
      );
      if (verdict === "gone") throw gone(h);
      if (verdict) {
        const q = last.get(`${h.kind}/${h.name}`)!;
        if (q.phase === "Failed") throw failed(h, q);
        return verdict;
      }
    }
  };

  const credentials = async (h: BranchHandle, b: BranchDatabase): Promise<BranchCredentials> => {
    // The sync controller may copy the Secret to the Primary just after the status.
    const secretName = b.status!.secretName!;
    for (;;) {
      const c = await branches.credentials(h.namespace, secretName);
      if (c) return c;
      if (Date.now() >= deadline)
        throw new CliError(
          CliErrorCode.BRANCH_TIMEOUT,
          `database branch ${h.name} is Ready but its Secret ${secretName} in namespace ${h.namespace} is missing ` +
            `or incomplete after ${Math.round(o.timeoutMs / 1000)} s: raise branchTimeoutSeconds in switchyard.json, ` +
            `or see \`switchyard branches status ${h.name}\``,
        );
      if (!(await sleep(o.secretRetryMs ?? 250, stop.signal)))
        throw new CliError(CliErrorCode.CLOSED, "interrupted");
    }
  };

  try {
    return await Promise.all(
      handles.map(async (h) => {
        const b = await one(h);
        return { ...h, branchName: b.status!.branchName!, credentials: await credentials(h, b) };
      }),
    );
  } finally {
    // The first failure ends the other waits too.
    stop.abort();
    o.signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * Waits until a branch CR no longer exists (its finalizers released); true when it is
 * gone, false when `timeoutMs` passed first.
 */
export async function waitBranchGone(
  kc: KubeConfig,
  branches: KubeBranches,
  h: Pick<BranchHandle, "kind" | "name" | "namespace">,
  timeoutMs: number,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  const stop = new AbortController();
  try {
    for (;;) {
      const cur = await branches.get(h.kind, h.name, h.namespace);
      if (!cur) return true;
      const remaining = deadline - Date.now();
      if (remaining <= 0) return false;
      let gone = false;
      await watchOnce(
        kc,
        h,
        cur.metadata.resourceVersion,
        (type) => (gone = type === "DELETED"),
        stop.signal,
        Math.min(remaining, 30_000),
      );
      if (gone) return true;
    }
  } finally {
    stop.abort();
  }
}
