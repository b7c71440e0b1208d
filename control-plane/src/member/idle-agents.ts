// What happens to a target's agents once no session needs them, in one place for the three
// ways there: the last session ended (linger or restore, agent-provisioner.ts `idle`), the
// linger ran out (linger-reconciler.ts), and `switchyard agents remove` (a release-only
// session). Every path runs under the target's lock and looks at the sessions again first, so
// a session that starts meanwhile keeps its agents; restores are counted by reason.
import type { Logger } from "pino";
import { Counter, type Registry } from "prom-client";
import type { AgentProvisioner, AgentTarget, IdleOutcome } from "./agent-provisioner.js";
import type { AgentSecretStore } from "./agent-secret-store.js";
import type { TargetLocks } from "./target-locks.js";
import type { TargetSessions } from "./target-sessions.js";

export type RestoreReason = "last-session" | "linger-expired" | "removed";

/** What a removal did: restored now, marked for when the sessions using it end, nothing (none ours), or refused. */
export type RemovalOutcome = "removed" | "after-sessions" | "none" | "born";

export interface IdleAgentsOptions {
  provisioner: AgentProvisioner;
  secrets: AgentSecretStore;
  locks: TargetLocks;
  sessions: TargetSessions;
  /** Drops what the reconciler remembers of the target's agents (ensured-targets.ts). */
  forget: (id: string) => void;
  registry?: Registry;
  logger?: Logger;
}

export class IdleAgents {
  readonly #o: IdleAgentsOptions;
  readonly #restores: Counter<"reason"> | undefined;

  constructor(o: IdleAgentsOptions) {
    this.#o = o;
    this.#restores = o.registry
      ? new Counter({
          name: "switchyard_agent_restores_total",
          help:
            "Workloads whose saved template was put back (agents removed), by reason: last-session " +
            "(no linger), linger-expired, removed (switchyard agents remove).",
          labelNames: ["reason"],
          registers: [o.registry],
        })
      : undefined;
  }

  /** The last session on the target ended; the caller holds the target's lock. */
  async lastSessionEnded(target: AgentTarget, signal: AbortSignal): Promise<IdleOutcome> {
    const { provisioner } = this.#o;
    this.#o.forget(target.id);
    let outcome: IdleOutcome;
    if (provisioner.idle) outcome = await provisioner.idle(target, signal);
    else {
      await provisioner.release(target, signal);
      outcome = { kind: "released" };
    }
    if (outcome.kind === "released") await this.#released(target, "last-session");
    return outcome;
  }

  /** The linger ran out: restore unless a session needs the agents again. Takes the lock. */
  expire(target: AgentTarget, signal: AbortSignal): Promise<boolean> {
    return this.#o.locks.with(target.id, async () => {
      if (await this.#inUse(target)) return false;
      this.#o.forget(target.id);
      await this.#o.provisioner.release(target, signal);
      await this.#released(target, "linger-expired");
      this.#o.logger?.info(
        { target: target.id },
        "the idle agent's linger ended; restored the original pod template",
      );
      return true;
    });
  }

  /**
   * `switchyard agents remove`: restore now when no session uses the agents, else mark the
   * workload so that the last of them restores at once. Pods born with the agent keep it
   * (their owner opted in). Takes the lock.
   */
  remove(target: AgentTarget, signal: AbortSignal): Promise<RemovalOutcome> {
    return this.#o.locks.with(target.id, async () => {
      const { provisioner } = this.#o;
      // A provisioner that keeps nothing idle (process agents stop with their last session).
      if (!provisioner.carries) return (await this.#inUse(target)) ? "after-sessions" : "none";
      const carries = await provisioner.carries(target);
      if (carries === "born") return "born";
      if (carries === "none") return "none";
      if (await this.#inUse(target)) {
        return (await provisioner.requestRemoval?.(target)) ? "after-sessions" : "none";
      }
      this.#o.forget(target.id);
      await provisioner.release(target, signal);
      await this.#released(target, "removed");
      this.#o.logger?.info(
        { target: target.id },
        "agents removed on request; restored the original pod template",
      );
      return "removed";
    });
  }

  #inUse(target: AgentTarget): Promise<boolean> {
    return this.#o.sessions.any(target.namespace, {
      kind: target.kind as "deployment" | "statefulset" | "pod",
      name: target.name,
    });
  }

  async #released(target: AgentTarget, reason: RestoreReason): Promise<void> {
    await this.#o.secrets.delete(target.namespace, target.id);
    this.#restores?.inc({ reason });
  }
}
