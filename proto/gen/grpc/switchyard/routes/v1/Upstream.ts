// Original file: proto/route_discovery.proto


export interface Upstream {
  /**
   * Cluster name (RFC 1123 label); the agent id in a member gateway.
   */
  'cluster'?: (string);
  /**
   * ws:// or wss:// URL of the upstream (gateway router or agent).
   */
  'url'?: (string);
  /**
   * Secret this router presents to that upstream.
   */
  'secret'?: (string);
  /**
   * Receives the stateful and outgoing frame families.
   */
  'isDefault'?: (boolean);
  /**
   * Optional PEM CA bundle to verify a wss:// upstream.
   */
  'caPem'?: (string);
  /**
   * Name the upstream's certificate is verified against (TLS SNI and hostname check)
   * instead of the URL's host; empty = the URL's host. Lets a router dial an agent by
   * pod IP while its certificate names a fixed DNS name (e.g. "switchyard-agent").
   */
  'serverName'?: (string);
  /**
   * The `cluster` label of this upstream in the router's metrics; empty = `cluster`. Member
   * gateways set "agent" for their agents, whose ids change with every pod, so the label
   * sets stay bounded across rollouts.
   */
  'metricsCluster'?: (string);
  /**
   * The upstream is a Switchyard router that serves /v1/mux (proto/mux.proto): this session
   * rides the one multiplexed connection the router keeps to that gateway instead of a
   * WebSocket of its own. Never set for agents.
   */
  'mux'?: (boolean);
}

export interface Upstream__Output {
  /**
   * Cluster name (RFC 1123 label); the agent id in a member gateway.
   */
  'cluster': (string);
  /**
   * ws:// or wss:// URL of the upstream (gateway router or agent).
   */
  'url': (string);
  /**
   * Secret this router presents to that upstream.
   */
  'secret': (string);
  /**
   * Receives the stateful and outgoing frame families.
   */
  'isDefault': (boolean);
  /**
   * Optional PEM CA bundle to verify a wss:// upstream.
   */
  'caPem': (string);
  /**
   * Name the upstream's certificate is verified against (TLS SNI and hostname check)
   * instead of the URL's host; empty = the URL's host. Lets a router dial an agent by
   * pod IP while its certificate names a fixed DNS name (e.g. "switchyard-agent").
   */
  'serverName': (string);
  /**
   * The `cluster` label of this upstream in the router's metrics; empty = `cluster`. Member
   * gateways set "agent" for their agents, whose ids change with every pod, so the label
   * sets stay bounded across rollouts.
   */
  'metricsCluster': (string);
  /**
   * The upstream is a Switchyard router that serves /v1/mux (proto/mux.proto): this session
   * rides the one multiplexed connection the router keeps to that gateway instead of a
   * WebSocket of its own. Never set for agents.
   */
  'mux': (boolean);
}
