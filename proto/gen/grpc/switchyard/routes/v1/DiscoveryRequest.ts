// Original file: proto/route_discovery.proto

import type { ErrorDetail as _switchyard_routes_v1_ErrorDetail, ErrorDetail__Output as _switchyard_routes_v1_ErrorDetail__Output } from '../../../switchyard/routes/v1/ErrorDetail.js';
import type { LiveSessions as _switchyard_routes_v1_LiveSessions, LiveSessions__Output as _switchyard_routes_v1_LiveSessions__Output } from '../../../switchyard/routes/v1/LiveSessions.js';

export interface DiscoveryRequest {
  /**
   * Stable id of the router pod (e.g. its pod name). Required on the first request and
   * must not change on a stream.
   */
  'routerId'?: (string);
  /**
   * The version the router serves: on the first request the version it already has (empty
   * when none), on an ACK the version just applied, on a NACK the version it kept.
   */
  'versionInfo'?: (string);
  /**
   * Nonce of the response this request ACKs or NACKs; empty on the first request and on
   * pure live-session reports.
   */
  'responseNonce'?: (string);
  /**
   * Set on a NACK: why the router could not apply the response.
   */
  'errorDetail'?: (_switchyard_routes_v1_ErrorDetail | null);
  /**
   * When set, the complete list of sessions that currently have a live client on this
   * router (sent periodically and on change; the control plane derives heartbeats).
   */
  'liveSessions'?: (_switchyard_routes_v1_LiveSessions | null);
}

export interface DiscoveryRequest__Output {
  /**
   * Stable id of the router pod (e.g. its pod name). Required on the first request and
   * must not change on a stream.
   */
  'routerId': (string);
  /**
   * The version the router serves: on the first request the version it already has (empty
   * when none), on an ACK the version just applied, on a NACK the version it kept.
   */
  'versionInfo': (string);
  /**
   * Nonce of the response this request ACKs or NACKs; empty on the first request and on
   * pure live-session reports.
   */
  'responseNonce': (string);
  /**
   * Set on a NACK: why the router could not apply the response.
   */
  'errorDetail': (_switchyard_routes_v1_ErrorDetail__Output | null);
  /**
   * When set, the complete list of sessions that currently have a live client on this
   * router (sent periodically and on change; the control plane derives heartbeats).
   */
  'liveSessions': (_switchyard_routes_v1_LiveSessions__Output | null);
}
