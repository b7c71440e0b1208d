// Error classes of the router, each with a stable code callers and tests match on.
// (Invalid options and flags are lib/option-error.ts's OptionError.)

/** A routing-table delta that cannot be applied; the discovery client turns it into a NACK. */
export class RouteTableError extends Error {
  override readonly name = "RouteTableError";
  readonly code = "SWITCHYARD_ROUTE_TABLE_INVALID";
}
