// The RouteDiscovery gRPC service (route_discovery.proto) as @grpc/grpc-js serves and calls
// it: the service definition loaded by @grpc/proto-loader, the wire types generated from the
// same .proto by `npm run gen:grpc` (proto/gen/grpc), the loader options those types assume,
// and the few wire conventions both ends share (status names, dial target of a URL).
// The .proto is read at run time, so the build copies it next to this module.
import { fileURLToPath } from "node:url";
import { loadPackageDefinition, status } from "@grpc/grpc-js";
import { loadSync, type Options } from "@grpc/proto-loader";
import type { ProtoGrpcType } from "./gen/grpc/route_discovery.js";

export type {
  DiscoveryRequest,
  DiscoveryRequest__Output,
} from "./gen/grpc/switchyard/routes/v1/DiscoveryRequest.js";
export type {
  DiscoveryResponse,
  DiscoveryResponse__Output,
} from "./gen/grpc/switchyard/routes/v1/DiscoveryResponse.js";
export type { RouteDiscoveryHandlers } from "./gen/grpc/switchyard/routes/v1/RouteDiscovery.js";

/** The .proto both ends (and foreign clients such as k6) load. */
export const ROUTE_DISCOVERY_PROTO = fileURLToPath(new URL("./route_discovery.proto", import.meta.url));

/**
 * How received messages are turned into objects. Must match the flags of `npm run gen:grpc`:
 * `--defaults` means an absent string is "", an absent list [], an absent message null;
 * enums stay numbers (the generator's default).
 */
export const ROUTE_DISCOVERY_LOADER_OPTIONS: Options = { defaults: true };

const v1 = (
  loadPackageDefinition(
    loadSync(ROUTE_DISCOVERY_PROTO, ROUTE_DISCOVERY_LOADER_OPTIONS),
  ) as unknown as ProtoGrpcType
).switchyard.routes.v1;

/** Service definition for `grpc.Server#addService`. */
export const RouteDiscoveryService = v1.RouteDiscovery.service;

/** Client constructor: `new RouteDiscoveryGrpcClient(target, credentials, channelOptions)`. */
export const RouteDiscoveryGrpcClient = v1.RouteDiscovery;

/**
 * A gRPC status code as a name in PascalCase ("PermissionDenied"): the form metrics labels,
 * logs and status views use on both ends.
 */
export function statusName(code: number): string {
  const name = status[code];
  if (name === undefined) return String(code);
  return name
    .toLowerCase()
    .split("_")
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join("");
}

/**
 * The grpc-js dial target of a RouteDiscovery URL (`https://host:port`, or `http://` for
 * the embedded environment): `host:port`, with the scheme's default port when none is given.
 */
export function routeDiscoveryTarget(url: URL): string {
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  return `${url.hostname}:${port}`;
}
