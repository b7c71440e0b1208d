// A session's database branches from start to end (DESIGN §4 step 1, §7): before the
// session object exists, one branch CR per configured branch is created on the Primary
// (or a shared one reused), and every branch awaited until Ready with its credentials.
// If that fails, the branches made for this session are deleted again, so a failed start
// leaves nothing behind. When the session ends, its own branches are deleted; shared
// ones (an `id`) are left to their TTL for the other sessions using them.
import type { KubeConfig } from "@kubernetes/client-node";
import type { DatabaseBranchRef } from "../../../../proto/api/v1alpha1/index.js";
import type { BranchRequest } from "../local/branch-config.js";
import { waitBranchesReady, type BranchProgress } from "./branch-wait.js";
import { KubeBranches, type BranchHandle, type ReadyBranch } from "./kube-branches.js";

export interface PrepareBranchesOptions {
  namespace: string;
  /** The session's name, chosen before the session is created. */
  sessionName: string;
  /** How long to wait for every branch to be Ready, ms. */
  timeoutMs: number;
  signal?: AbortSignal;
  /** Each branch once its CR exists: created now, or a shared one reused. */
  onBranch?: (h: BranchHandle, reused: boolean) => void;
  onProgress?: (p: BranchProgress) => void;
}

/** The session's connectParams.databaseBranches for `branches`. */
export const branchRefs = (branches: readonly BranchHandle[]): DatabaseBranchRef[] =>
  branches.map((b) => ({ envVar: b.envVar, kind: b.kind, name: b.name }));

/** Creates or reuses every branch and waits until all are Ready; returns them with credentials. */
export async function prepareBranches(
  kc: KubeConfig,
  requests: readonly BranchRequest[],
  o: PrepareBranchesOptions,
): Promise<ReadyBranch[]> {
  if (requests.length === 0) return [];
  const kube = new KubeBranches(kc);
  const made: BranchHandle[] = [];
  try {
    for (const r of requests) {
      if (o.signal?.aborted) throw o.signal.reason;
      const { reused, ...h } = await kube.ensure(r, o.sessionName, o.namespace);
      made.push(h);
      o.onBranch?.(h, reused);
    }
    return await waitBranchesReady(kc, kube, made, {
      timeoutMs: o.timeoutMs,
      ...(o.signal ? { signal: o.signal } : {}),
      ...(o.onProgress ? { onProgress: o.onProgress } : {}),
    });
  } catch (err) {
    await releaseBranches(kc, made).catch(() => {});
    throw err;
  }
}

/**
 * Deletes the branches made for this session only (shared ones stay for their TTL);
 * returns the names it asked to delete.
 */
export async function releaseBranches(kc: KubeConfig, branches: readonly BranchHandle[]): Promise<string[]> {
  const kube = new KubeBranches(kc);
  const owned = branches.filter((b) => b.owned);
  const results = await Promise.allSettled(owned.map((b) => kube.delete(b)));
  const failed = results.flatMap((r, i) => (r.status === "rejected" ? [[owned[i]!.name, r.reason]] : []));
  if (failed.length > 0) {
    const [name, reason] = failed[0] as [string, Error];
    throw new Error(
      `could not delete database branch ${name}${failed.length > 1 ? ` (and ${failed.length - 1} more)` : ""}: ` +
        `${reason.message}; it expires by its TTL, or delete it with \`switchyard branches destroy ${name}\``,
    );
  }
  return owned.map((b) => b.name);
}
