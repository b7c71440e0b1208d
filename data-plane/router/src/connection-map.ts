// The connection ids of one session (DESIGN §5): every upstream numbers its incoming
// connections independently, so two upstreams may both announce connection 1. The client
// sees one session-unique id per (upstream, agent id); this map allocates those ids and
// translates both ways, so a reply reaches only the upstream that owns the connection.
// Generic over the upstream handle: it knows nothing about sockets or frames.

/** Largest id the 32-bit header field carries; allocation wraps to 1 after it (0 means "none"). */
const MAX_ID = 0xffffffff;

export interface ConnectionOwner<U> {
  upstream: U;
  /** The id the owning upstream uses for the connection. */
  agentId: number;
}

export class ConnectionMap<U> {
  /** Session id → owner and the owner's id. */
  private readonly bySession = new Map<number, ConnectionOwner<U>>();
  /** Per upstream: agent id → session id. */
  private readonly byUpstream = new Map<U, Map<number, number>>();
  private nextId = 1;

  /** Open connections across all upstreams. */
  get size(): number {
    return this.bySession.size;
  }

  /** Open connections owned by `upstream`. */
  countOn(upstream: U): number {
    return this.byUpstream.get(upstream)?.size ?? 0;
  }

  /** True when `upstream` already has `agentId` open. */
  has(upstream: U, agentId: number): boolean {
    return this.byUpstream.get(upstream)?.has(agentId) ?? false;
  }

  /**
   * Records a connection `upstream` announced and returns its session id. The caller checks
   * `has` first: an agent id already open on that upstream is a protocol error.
   */
  open(upstream: U, agentId: number): number {
    const id = this.allocate();
    this.bySession.set(id, { upstream, agentId });
    let ids = this.byUpstream.get(upstream);
    if (!ids) this.byUpstream.set(upstream, (ids = new Map()));
    ids.set(agentId, id);
    return id;
  }

  /** The session id of `upstream`'s connection `agentId` (upstream → client direction). */
  sessionId(upstream: U, agentId: number): number | undefined {
    return this.byUpstream.get(upstream)?.get(agentId);
  }

  /** Who owns session connection `id` and under which id (client → upstream direction). */
  owner(id: number): ConnectionOwner<U> | undefined {
    return this.bySession.get(id);
  }

  /** Ends session connection `id` (a CLOSE from either side). */
  close(id: number): void {
    const owner = this.bySession.get(id);
    if (!owner) return;
    this.bySession.delete(id);
    const ids = this.byUpstream.get(owner.upstream);
    ids?.delete(owner.agentId);
    if (ids?.size === 0) this.byUpstream.delete(owner.upstream);
  }

  /** Ends every connection of `upstream` (it was lost or removed); returns their session ids. */
  dropUpstream(upstream: U): number[] {
    const ids = this.byUpstream.get(upstream);
    if (!ids) return [];
    this.byUpstream.delete(upstream);
    const dropped = [...ids.values()];
    for (const id of dropped) this.bySession.delete(id);
    return dropped;
  }

  clear(): void {
    this.bySession.clear();
    this.byUpstream.clear();
  }

  /** The next free id; skips ids still open after a wrap-around. */
  private allocate(): number {
    for (;;) {
      const id = this.nextId;
      this.nextId = this.nextId >= MAX_ID ? 1 : this.nextId + 1;
      if (!this.bySession.has(id)) return id;
    }
  }
}
