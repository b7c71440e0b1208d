// The ENV family: answers an EnvGet from the target's environment (TargetView, resolved
// as the kubelet would), with the DB-branch rewrites applied, then narrowed by the
// request's include/exclude globs and names. Rewrites (branch-rewrite.ts): first the older
// database-only form — from the EnvGet when it sets both branch_variable and branch, else
// from the session's grant (its secrets-file entry) — then each of EnvGet.branches, then
// each of EnvGet.queues (queue-rewrite.ts).
// Rewriting before filtering means a branch variable the request leaves out is still
// checked, and still never answered with the source database in it.
// Failures answer `EnvResult.error = "<CODE>: <message>"`; a failed API read is
// SWITCHYARD_ENV_UNAVAILABLE.
import { ErrorCode, isErrorCode } from "../../../../proto/error-codes.js";
import { encodeFrame } from "../../../../proto/frame-codec.js";
import { EnvKind, EnvResultSchema, FrameFamily, type EnvGet } from "../../../../proto/gen/session_pb.js";
import { rewriteBranchDatabase, rewriteBranches, type BranchDatabaseRewrite } from "./branch-rewrite.js";
import { filterEnv } from "./env-resolver.js";
import { rewriteQueues } from "./queue-rewrite.js";
import type { TargetView } from "./target-view.js";

export interface EnvRequest {
  view: TargetView;
  get: EnvGet;
  requestId: number;
  /** The session's own branch, older form (from its grant), used when the EnvGet names none. */
  sessionBranch: BranchDatabaseRewrite | undefined;
  /** Counts an answered error by code. */
  countError(code: string): void;
  /** Sends the answer toward the peer. */
  send(frame: Buffer): void;
}

/** Answers one EnvGet with an EnvResult through `r.send`. */
export async function answerEnv(r: EnvRequest): Promise<void> {
  const { get } = r;
  const reply = (init: { vars?: Record<string, string>; error?: string }) =>
    r.send(
      encodeFrame(
        { family: FrameFamily.ENV, kind: EnvKind.RESULT, requestId: r.requestId },
        EnvResultSchema,
        init,
      ),
    );
  try {
    let env = await r.view.env();
    const branch =
      get.branch && get.branchVariable
        ? { variable: get.branchVariable, branch: get.branch }
        : r.sessionBranch;
    if (branch) env = rewriteBranchDatabase(env, branch);
    env = filterEnv(rewriteQueues(rewriteBranches(env, get.branches), get.queues), get.include, get.exclude);
    const vars: Record<string, string> = {};
    if (get.names.length > 0) {
      for (const n of get.names) {
        const v = env.get(n);
        if (v !== undefined) vars[n] = v;
      }
    } else for (const [k, v] of env) vars[k] = v;
    reply({ vars });
  } catch (err) {
    const e = err as Error & { code?: string };
    const code = typeof e.code === "string" && isErrorCode(e.code) ? e.code : ErrorCode.ENV_UNAVAILABLE;
    r.countError(code);
    reply({
      error: `${code}: ${code === ErrorCode.ENV_UNAVAILABLE ? `reading the target's environment through the Kubernetes API failed: ${e.message}` : e.message}`,
    });
  }
}
