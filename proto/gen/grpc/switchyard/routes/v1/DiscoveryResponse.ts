// Original file: proto/route_discovery.proto

import type { SessionRoute as _switchyard_routes_v1_SessionRoute, SessionRoute__Output as _switchyard_routes_v1_SessionRoute__Output } from '../../../switchyard/routes/v1/SessionRoute.js';

export interface DiscoveryResponse {
  /**
   * Opaque version of the routing state this response brings the router to. Never empty.
   */
  'versionInfo'?: (string);
  /**
   * Strictly increasing on a stream; echo it in the ACK/NACK.
   */
  'nonce'?: (string);
  /**
   * True: upserts are the complete table and every session not listed must be dropped.
   * False: apply upserts and removes on top of the last ACKed version.
   */
  'fullSnapshot'?: (boolean);
  'upserts'?: (_switchyard_routes_v1_SessionRoute)[];
  /**
   * session_id of each route to drop.
   */
  'removes'?: (string)[];
}

export interface DiscoveryResponse__Output {
  /**
   * Opaque version of the routing state this response brings the router to. Never empty.
   */
  'versionInfo': (string);
  /**
   * Strictly increasing on a stream; echo it in the ACK/NACK.
   */
  'nonce': (string);
  /**
   * True: upserts are the complete table and every session not listed must be dropped.
   * False: apply upserts and removes on top of the last ACKed version.
   */
  'fullSnapshot': (boolean);
  'upserts': (_switchyard_routes_v1_SessionRoute__Output)[];
  /**
   * session_id of each route to drop.
   */
  'removes': (string)[];
}
