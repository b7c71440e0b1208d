// The ENV family's queue rewrites (EnvGet.queues): a variable of the target that names a
// split SQS queue is set to the session's output queue, so the local process consumes the
// messages its split filter routes to it (DESIGN §7). The value is what the session's status
// reports (`status.queues[].localValue`: a URL, or a name when the target holds a name).
import { ErrorCode } from "../../../../proto/error-codes.js";
import type * as pb from "../../../../proto/gen/session_pb.js";
import { EnvResolveError, type ResolvedEnv } from "./env-resolver.js";

const bad = (message: string) => new EnvResolveError(ErrorCode.ENV_UNSUPPORTED, message);

/** Applies every rewrite, in order; the input is left untouched. */
export function rewriteQueues(env: ResolvedEnv, rewrites: readonly pb.QueueRewrite[]): ResolvedEnv {
  if (rewrites.length === 0) return env;
  const out = new Map(env);
  rewrites.forEach((r, i) => {
    if (!r.variable)
      throw bad(`queues[${i}].variable is empty: name the variable holding the queue, e.g. ORDERS_QUEUE_URL`);
    if (!r.value)
      throw bad(
        `queues[${i}] (${r.variable}) has no value: the split has no output queue yet; wait until the session is Ready`,
      );
    if (!out.has(r.variable))
      throw new EnvResolveError(
        ErrorCode.ENV_KEY_NOT_FOUND,
        `the target has no variable ${r.variable} to point at the session's output queue: fix envVar of ` +
          "the queue in the target's QueueConsumer",
      );
    out.set(r.variable, r.value);
  });
  return out;
}
