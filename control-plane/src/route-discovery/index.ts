// Public surface of the RouteDiscovery server: the snapshot cache reconcilers feed, the
// stream server (protocol), the gRPC listener, and router authentication.
export { RouteSnapshotCache } from "./snapshot-cache.js";
export type { RouteSnapshot, RouteChanges, RouteSnapshotCacheOptions } from "./snapshot-cache.js";
export { validateSessionRoute } from "./route-validation.js";
export { RouteDiscoveryStreamServer } from "./stream-server.js";
export { stopServingRoutesWhenLeadershipEnds, type RouterStreams } from "./leading-routes.js";
export type { RouteDiscoveryCall, RouteDiscoveryStreamServerOptions } from "./stream-server.js";
export type { ConnectedRouter, LiveSessionsReport } from "./discovery-stream.js";
export { RouteDiscoveryServer, MAX_CONNECTION_AGE_LIMIT_MS } from "./route-discovery-server.js";
export type { RouteDiscoveryServerOptions } from "./route-discovery-server.js";
export { RouterAuthenticator } from "./router-authenticator.js";
export type {
  RouterIdentity,
  RouterPeer,
  RouterAuthenticatorOptions,
  BearerTokenAuthenticator,
} from "./router-authenticator.js";
export { TokenReviewAuthenticator, kubeTokenReviewer } from "./token-review-authenticator.js";
export type {
  ServiceAccountRef,
  TokenReviewer,
  TokenReviewResult,
  TokenReviewAuthenticatorOptions,
} from "./token-review-authenticator.js";
export { RouteDiscoveryMetrics } from "./route-discovery-metrics.js";
export { DiscoveryStreamError, RouteValidationError, RouterAuthError } from "./errors.js";
