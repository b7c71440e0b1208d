// What the control-plane fuzz suites read out of a refusal by the real API server (the 422
// body's message and causes) and how they decide that it names the field a mutation touched.
import { ApiException } from "@kubernetes/client-node";
import { dottedPath, type Mutation } from "../support/mutated-json.js";

export interface Refusal {
  code: number;
  message: string;
  /** Field paths of the causes, as the API server prints them (`spec.a.b[0]`, `spec.m[key]`). */
  fields: string[];
}

/** The refusal in `err`, or undefined when `err` is not an answer of the API server. */
export function refusalOf(err: unknown): Refusal | undefined {
  if (!(err instanceof ApiException)) return undefined;
  const raw = typeof err.body === "string" ? err.body : JSON.stringify(err.body ?? {});
  let body: { message?: string; details?: { causes?: { field?: string; message?: string }[] } } = {};
  try {
    body = JSON.parse(raw) as typeof body;
  } catch {
    body = { message: raw };
  }
  return {
    code: err.code,
    message: body.message ?? "",
    fields: (body.details?.causes ?? []).map((c) => c.field ?? ""),
  };
}

/** `a.b[0].c`, `a.b[key]` → parts, so two spellings of one path compare equal. */
function parts(path: string): string[] {
  return path
    .replace(/\[([^\]]*)\]/g, ".$1")
    .split(".")
    .filter((p) => p !== "");
}

/** True when one path is the other or contains it (an error on a map names the map, not the key). */
export function related(a: string, b: string): boolean {
  const pa = parts(a);
  const pb = parts(b);
  const n = Math.min(pa.length, pb.length);
  return n > 0 && pa.slice(0, n).join("\u0000") === pb.slice(0, n).join("\u0000");
}

/**
 * Whether a refusal names a field one of the mutations (made under `root`, e.g. "spec")
 * touched — or a field whose cross-field rule reads one (`dependsOn`: field → what its rule reads).
 */
export function namesMutatedField(
  refusal: Refusal,
  mutations: readonly Mutation[],
  root: string,
  dependsOn: Readonly<Record<string, readonly string[]>> = {},
): boolean {
  // A lone surrogate in a key reaches the API server as U+FFFD, and its errors print it so.
  const wellFormed = (p: string) =>
    p.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");
  const touched = mutations.map((m) => wellFormed(`${root}.${dottedPath(m.path)}`).replace(/\.$/, ""));
  return refusal.fields.some(
    (f) => f !== "" && [f, ...(dependsOn[f] ?? [])].some((g) => touched.some((t) => related(g, t))),
  );
}
