// How long a branch lives (DESIGN §7): a Ready or Failed branch expires `ttlSeconds` after
// the last moment a session used it. While a ClusterSession of this cluster names the branch
// in `spec.connectParams.databaseBranches`, `expiresAt` is kept at least half a TTL ahead
// (rewritten when less is left, so a status write happens at most every ttl/2 per branch);
// once no session names it, the branch goes at `expiresAt`. A branch still being made has no
// expiry: the CLI waits for it before its session exists.
import type { BranchDatabasePhase, ClusterSession } from "../../../proto/api/v1alpha1/index.js";

export interface LifetimeInput {
  now: number;
  ttlSeconds: number;
  phase: BranchDatabasePhase | undefined;
  /** status.expiresAt as stored. */
  expiresAt: string | undefined;
  /** Names of the sessions using the branch now, sorted. */
  sessions: readonly string[];
  /** status.sessions as stored. */
  recordedSessions: readonly string[] | undefined;
}

export type LifetimeDecision =
  | { expire: true }
  | {
      expire: false;
      /** Status fields to write, when they changed. */
      write?: { expiresAt?: string; sessions?: string[] };
      /** Look again after this long (ms); undefined: no deadline. */
      recheckMs?: number;
    };

export function decideLifetime(i: LifetimeInput): LifetimeDecision {
  if (i.phase !== "Ready" && i.phase !== "Failed") return { expire: false };
  const ttlMs = i.ttlSeconds * 1000;
  const stored = Date.parse(i.expiresAt ?? "");
  const write: { expiresAt?: string; sessions?: string[] } = {};
  if (!sameList(i.sessions, i.recordedSessions ?? [])) write.sessions = [...i.sessions];
  let expiresAt = stored;
  if (i.sessions.length > 0) {
    if (Number.isNaN(stored) || stored - i.now < ttlMs / 2) expiresAt = i.now + ttlMs;
  } else if (Number.isNaN(stored)) {
    expiresAt = i.now + ttlMs;
  } else if (stored <= i.now) {
    return { expire: true };
  }
  if (expiresAt !== stored) write.expiresAt = new Date(expiresAt).toISOString();
  const untilRefresh = i.sessions.length > 0 ? expiresAt - ttlMs / 2 - i.now : expiresAt - i.now;
  return {
    expire: false,
    ...(Object.keys(write).length > 0 ? { write } : {}),
    recheckMs: Math.max(1000, untilRefresh),
  };
}

/** Sessions of `namespace` (not being deleted) whose connect params name branch `kind`/`name`, sorted. */
export function sessionsUsingBranch(
  sessions: readonly ClusterSession[],
  namespace: string,
  kind: string,
  name: string,
): string[] {
  return sessions
    .filter(
      (s) =>
        s.metadata?.namespace === namespace &&
        !s.metadata.deletionTimestamp &&
        (s.spec.connectParams?.databaseBranches ?? []).some((b) => b.kind === kind && b.name === name),
    )
    .map((s) => s.metadata!.name!)
    .sort();
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
