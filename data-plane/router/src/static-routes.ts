// A routing table from a file instead of the control plane: for tests, benchmarks and
// the embedded environment. The file (JSON or YAML) is a list of SessionRoute objects in
// protobuf JSON form, or `{ version?: string, routes: [...] }`. It is applied as a full
// resync; its version defaults to a hash of the content so a reload with no change is a no-op.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { parse as parseYaml } from "yaml";
import { SessionRouteSchema, type SessionRoute } from "../../../proto/gen/route_discovery_pb.js";
import { RouteTableError } from "./router-errors.js";
import type { RouteDelta } from "./routing-table.js";

export function parseStaticRoutes(content: string, source = "routes file"): RouteDelta {
  let doc: unknown;
  try {
    doc = parseYaml(content); // YAML is a superset of JSON
  } catch (err) {
    throw new RouteTableError(`${source} is neither JSON nor YAML: ${(err as Error).message}`);
  }
  const list = Array.isArray(doc) ? doc : (doc as { routes?: unknown })?.routes;
  if (!Array.isArray(list))
    throw new RouteTableError(`${source} must be a list of routes or an object with a 'routes' list`);
  const upserts: SessionRoute[] = list.map((r, i) => {
    try {
      return fromJson(SessionRouteSchema, r as JsonValue);
    } catch (err) {
      throw new RouteTableError(`${source}: route #${i} is not a SessionRoute: ${(err as Error).message}`);
    }
  });
  const declared = Array.isArray(doc) ? undefined : (doc as { version?: unknown }).version;
  const version =
    typeof declared === "string" && declared !== ""
      ? declared
      : "file-" + createHash("sha256").update(content).digest("hex").slice(0, 16);
  return { fullResync: true, upserts, removes: [], version };
}

export async function loadStaticRoutes(path: string): Promise<RouteDelta> {
  return parseStaticRoutes(await readFile(path, "utf8"), path);
}
