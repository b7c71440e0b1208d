// Whether sessions still need a target's agents: asked when a session ends (is it the last?)
// and when an idle agent's linger runs out or its removal is asked for. The informer's
// sessions are only candidates, each confirmed by a GET (the cache may still show a session
// that is gone); without a confirmed one, a LIST of the namespace decides. Usually one GET
// instead of a LIST. Sessions that only ask for the agents' removal never need them.
import { GROUP, parseTarget, type ClusterSession } from "../../../proto/api/v1alpha1/index.js";

/** Finalizer the member puts on every ClusterSession it serves. */
export const MEMBER_FINALIZER = `${GROUP}/member-cleanup`;

type Target = ReturnType<typeof parseTarget>;

export interface SessionReads {
  get(ref: { namespace: string; name: string }): Promise<ClusterSession | undefined>;
  list(o: { namespace: string }): Promise<{ items: ClusterSession[] }>;
}

/** A session that carries no traffic and only asks for its target's idle agents to go. */
export function releasesAgentsOnly(s: ClusterSession): boolean {
  return s.spec.connectParams?.releaseAgents === true;
}

/** A session's target, or undefined when its spec does not name one we can read. */
export function safeTargetOf(s: ClusterSession): Target | undefined {
  try {
    return parseTarget(s.spec.target);
  } catch {
    return undefined;
  }
}

export class TargetSessions {
  constructor(
    private readonly client: SessionReads,
    private readonly cached: ((namespace: string) => readonly ClusterSession[]) | undefined,
  ) {}

  /**
   * Whether a session of the namespace other than `except` needs the target's agents: alive,
   * or being deleted while still holding this cluster's finalizer (their finalize comes
   * later); confirmed from the API server.
   */
  async any(namespace: string, target: Target, except?: string): Promise<boolean> {
    const needs = (o: ClusterSession) => {
      if (o.metadata.name === except || releasesAgentsOnly(o)) return false;
      if (o.metadata.deletionTimestamp && !(o.metadata.finalizers ?? []).includes(MEMBER_FINALIZER))
        return false;
      const t = safeTargetOf(o);
      return t !== undefined && t.kind === target.kind && t.name === target.name;
    };
    let checked = 0;
    for (const c of this.cached?.(namespace) ?? []) {
      if (!needs(c)) continue;
      const current = await this.client.get({ namespace, name: c.metadata.name! });
      if (current && needs(current)) return true;
      if (++checked >= 3) break;
    }
    const { items } = await this.client.list({ namespace });
    return items.some(needs);
  }
}
