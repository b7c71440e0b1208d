// Original file: proto/route_discovery.proto

import type { SessionState as _switchyard_routes_v1_SessionState, SessionState__Output as _switchyard_routes_v1_SessionState__Output } from '../../../switchyard/routes/v1/SessionState.js';
import type { Upstream as _switchyard_routes_v1_Upstream, Upstream__Output as _switchyard_routes_v1_Upstream__Output } from '../../../switchyard/routes/v1/Upstream.js';

/**
 * The routing table of one session as one router must serve it.
 */
export interface SessionRoute {
  /**
   * The session object's key "<namespace>:<name>" (proto/session-endpoint.ts sessionKey),
   * e.g. "shop:mc-0123456789abcdef" (parent) or "shop:mc-0123456789abcdef-east" (child);
   * clients and gateways connect to /v1/sessions/<session_id>. Never a name alone: names
   * are unique only within a namespace, and a same-named session of another namespace
   * must not replace, remove or attach to this one. 1-317 characters.
   */
  'sessionId'?: (string);
  /**
   * Lowercase hex sha256 of the secret the connecting client presents.
   */
  'clientKeyHash'?: (string);
  'state'?: (_switchyard_routes_v1_SessionState);
  'upstreams'?: (_switchyard_routes_v1_Upstream)[];
}

/**
 * The routing table of one session as one router must serve it.
 */
export interface SessionRoute__Output {
  /**
   * The session object's key "<namespace>:<name>" (proto/session-endpoint.ts sessionKey),
   * e.g. "shop:mc-0123456789abcdef" (parent) or "shop:mc-0123456789abcdef-east" (child);
   * clients and gateways connect to /v1/sessions/<session_id>. Never a name alone: names
   * are unique only within a namespace, and a same-named session of another namespace
   * must not replace, remove or attach to this one. 1-317 characters.
   */
  'sessionId': (string);
  /**
   * Lowercase hex sha256 of the secret the connecting client presents.
   */
  'clientKeyHash': (string);
  'state': (_switchyard_routes_v1_SessionState__Output);
  'upstreams': (_switchyard_routes_v1_Upstream__Output)[];
}
