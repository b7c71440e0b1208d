// Opening a session for a command, the same way for `exec`, `env` and `files`: progress
// lines on stderr while it comes up (its database branches first, then the session and its
// queue splits; a QueueSplitOverlap condition is a warning, printed once even with -q),
// Ctrl-C during startup deletes the half-made session and the branches made for it, and
// the router CA file is read once.
import { readFileSync } from "node:fs";
import type { KubeConfig } from "@kubernetes/client-node";
import { CliError, CliErrorCode } from "../sdk/cli-errors.js";
import type { SessionHandle } from "../sdk/kube/kube-sessions.js";
import { KubeSessions } from "../sdk/kube/kube-sessions.js";
import { openSession, type Session } from "../sdk/kube/open-session.js";
import type { SessionConfig } from "../sdk/local/session-config.js";
import type { SessionClientOptions } from "../sdk/session/session-client.js";
import { branchProgressLine, progressLine, queueProgressLine, type Out } from "./output.js";

export interface CommandSessionOptions {
  quiet?: boolean;
  readyTimeoutMs?: number;
  client?: Partial<Omit<SessionClientOptions, "sessionId" | "secret" | "urls" | "caPem">>;
}

export function readCaFile(path: string | undefined): string | undefined {
  if (!path) return undefined;
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new CliError(
      CliErrorCode.INVALID_OPTION,
      `cannot read router CA file ${path}: ${(err as Error).message}`,
    );
  }
}

export async function openCommandSession(
  kc: KubeConfig,
  cfg: SessionConfig,
  out: Out,
  o: CommandSessionOptions = {},
): Promise<Session> {
  const abort = new AbortController();
  let created: SessionHandle | undefined;
  const onSignal = () => {
    out.stderr("switchyard: interrupted while the session was starting; deleting it\n");
    abort.abort(new CliError(CliErrorCode.CLOSED, "interrupted"));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const log = (t: string) => {
    if (!o.quiet) out.stderr(`switchyard: ${t}\n`);
  };
  const caPem = readCaFile(cfg.routerCa);
  // Queue split changes update the session's progress too; its own line is printed once per change.
  let lastLine = "";
  const logProgress = (line: string) => {
    if (line !== lastLine) log((lastLine = line));
  };
  try {
    const session = await openSession({
      kubeConfig: kc,
      target: cfg.target,
      ...(cfg.namespace ? { namespace: cfg.namespace } : {}),
      ...(cfg.router.length ? { routerUrls: cfg.router } : {}),
      ...(caPem ? { routerCaPem: caPem } : {}),
      ...(cfg.ttlSeconds !== undefined ? { ttlSeconds: cfg.ttlSeconds } : {}),
      ...(cfg.failurePolicy ? { failurePolicy: cfg.failurePolicy } : {}),
      ...(o.readyTimeoutMs !== undefined ? { readyTimeoutMs: o.readyTimeoutMs } : {}),
      ...(o.client ? { client: o.client } : {}),
      branches: cfg.branches,
      branchTimeoutMs: cfg.branchTimeoutSeconds * 1000,
      onBranch: (b, reused) =>
        log(
          `${reused ? "sharing existing" : "created"} database branch ${b.name} (${b.kind}) for ${b.envVar}` +
            `${b.owned ? "" : " (shared: kept after this session, until its TTL)"}`,
        ),
      onBranchProgress: (p) => log(branchProgressLine(p)),
      queues: cfg.queues,
      onQueueProgress: (q) => log(queueProgressLine(q)),
      onQueueOverlap: (message) => out.stderr(`switchyard: warning: ${message}\n`),
      signal: abort.signal,
      onCreated: (h) => {
        created = h;
        log(`created ${h.mode} session ${h.id} for ${h.target} in namespace ${h.namespace}`);
      },
      onProgress: (p) => created && logProgress(progressLine(created.id, p)),
    });
    log(`connected to router ${session.client.url}`);
    return session;
  } catch (err) {
    if (abort.signal.aborted && created) await new KubeSessions(kc).delete(created).catch(() => {});
    throw err;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
