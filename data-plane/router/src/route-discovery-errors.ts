// Error classes of the RouteDiscovery client, with stable codes.

/** An option given to the RouteDiscovery client is missing or malformed. */
export class RouteDiscoveryConfigError extends Error {
  readonly code = "SWITCHYARD_ROUTE_DISCOVERY_CLIENT_CONFIG_INVALID";
  constructor(
    readonly option: string,
    message: string,
  ) {
    super(`option ${option}: ${message}`);
    this.name = "RouteDiscoveryConfigError";
  }
}
