// Mutated documents for the fuzz suites: start from a valid JSON document (a CR spec, Helm
// values, a config file) and apply a few mutations at random paths — a field removed, set to
// the wrong type, to an out-of-range number, to a hostile or huge string, an unknown key
// added, an array emptied or an item duplicated. Each mutation records the path it touched,
// so a property can check that the error names that field (or one of its parents).
import fc from "fast-check";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonPath = readonly (string | number)[];

export type MutationKind =
  | "remove"
  | "wrongType"
  | "number"
  | "hostileString"
  | "hugeString"
  | "emptyString"
  | "unknownKey"
  | "emptyContainer"
  | "duplicateItem";

export interface Mutation {
  kind: MutationKind;
  path: JsonPath;
}

export interface MutatedDocument<T extends Json = Json> {
  value: T;
  mutations: Mutation[];
}

/** Strings that broke parsers, templates, YAML, regex engines or logs somewhere once. */
export const HOSTILE_STRINGS: readonly string[] = [
  "",
  " ",
  "\t\n",
  "null",
  "~",
  "true",
  "0",
  "-1",
  "1e309",
  "0x1F",
  "NaN",
  "__proto__",
  "constructor",
  "toString",
  "{{ .Values }}",
  '{{ fail "x" }}',
  "${HOME}",
  "$(id)",
  "`id`",
  "a\nb: c",
  "- item",
  "key: value",
  "'quoted'",
  '"double"',
  "\\",
  "\u0000",
  "\u001b[31mred",
  "\u202eevil",
  "😀",
  "ǅ",
  "\ud800",
  "A".repeat(64),
  "a".repeat(254),
  "a/b",
  "../../etc/passwd",
  "https://",
  "http://example.com",
  "https://example.com:99999",
  "wss://x y",
  "(",
  "[a-",
  "a{1001}",
  "(?<name>x)",
  "(a+)+$",
  "\\p{Nope}",
  "*",
  "**/*",
  "-----BEGIN CERTIFICATE-----",
  "LS0tLS1CRUdJTi",
  "eyJhbGciOiJub25lIn0.e30.",
  "Deployment/Web",
  "deployment/",
  "pod/a/container/",
];

const hostileString = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_STRINGS) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme-ascii", maxLength: 40 }) },
);

const hugeString = fc
  .tuple(fc.constantFrom("a", "A", "-", "é", "ab/", "0"), fc.constantFrom(300, 4_097, 70_000, 300_000))
  .map(([unit, length]) => unit.repeat(Math.ceil(length / unit.length)).slice(0, length));

const numbers = fc.constantFrom(
  -1,
  0,
  1.5,
  -0.5,
  2 ** 31,
  2 ** 31 - 1,
  -(2 ** 31),
  2 ** 53,
  Number.MAX_SAFE_INTEGER,
  1e21,
  65_536,
  99_999,
);

const wrongType: fc.Arbitrary<Json> = fc.oneof(
  fc.constantFrom<Json>(null, true, false, 0, 1, "x", [], {}, ["x"], { x: 1 }),
  numbers,
);

/** Every path of `doc` (containers and leaves, not the root). */
export function pathsOf(doc: Json, prefix: JsonPath = []): JsonPath[] {
  const out: JsonPath[] = [];
  if (Array.isArray(doc))
    doc.forEach((v, i) => {
      out.push([...prefix, i], ...pathsOf(v, [...prefix, i]));
    });
  else if (doc !== null && typeof doc === "object")
    for (const [k, v] of Object.entries(doc)) out.push([...prefix, k], ...pathsOf(v, [...prefix, k]));
  return out;
}

function parentOf(doc: Json, path: JsonPath): Json | undefined {
  let node: Json | undefined = doc;
  for (const p of path.slice(0, -1)) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<string | number, Json>)[p];
  }
  return node;
}

function setAt(doc: Json, path: JsonPath, value: Json | undefined): void {
  const parent = parentOf(doc, path);
  const last = path[path.length - 1]!;
  if (Array.isArray(parent) && typeof last === "number") {
    if (value === undefined) parent.splice(last, 1);
    else parent[last] = value;
  } else if (parent !== null && typeof parent === "object" && !Array.isArray(parent)) {
    // defineProperty, so "__proto__" becomes an own key as JSON.parse would make it.
    if (value === undefined) delete (parent as Record<string, Json>)[last];
    else Object.defineProperty(parent, last, { value, enumerable: true, writable: true, configurable: true });
  }
}

interface Step {
  at: number;
  kind: MutationKind;
  wrong: Json;
  number: number;
  hostile: string;
  huge: string;
}

const step: fc.Arbitrary<Step> = fc.record({
  at: fc.nat(),
  kind: fc.constantFrom<MutationKind>(
    "remove",
    "wrongType",
    "wrongType",
    "number",
    "hostileString",
    "hostileString",
    "hugeString",
    "emptyString",
    "unknownKey",
    "emptyContainer",
    "duplicateItem",
  ),
  wrong: wrongType,
  number: numbers,
  hostile: hostileString,
  huge: hugeString,
});

function apply(doc: Json, s: Step, paths: readonly JsonPath[]): Mutation | undefined {
  if (paths.length === 0) return undefined;
  const path = paths[s.at % paths.length]!;
  const parent = parentOf(doc, path);
  const current = (parent as Record<string | number, Json> | undefined)?.[path[path.length - 1]!];
  switch (s.kind) {
    case "remove":
      setAt(doc, path, undefined);
      break;
    case "wrongType":
      setAt(doc, path, structuredClone(s.wrong));
      break;
    case "number":
      setAt(doc, path, s.number);
      break;
    case "hostileString":
      setAt(doc, path, s.hostile);
      break;
    case "hugeString":
      setAt(doc, path, s.huge);
      break;
    case "emptyString":
      setAt(doc, path, "");
      break;
    case "unknownKey": {
      if (current === null || typeof current !== "object" || Array.isArray(current)) return undefined;
      const key = s.hostile || "unknownField";
      setAt(doc, [...path, key], "unexpected");
      return { kind: s.kind, path: [...path, key] };
    }
    case "emptyContainer":
      if (current === null || typeof current !== "object") return undefined;
      setAt(doc, path, Array.isArray(current) ? [] : {});
      break;
    case "duplicateItem":
      if (!Array.isArray(current) || current.length === 0) return undefined;
      current.push(structuredClone(current[0]!));
      return { kind: s.kind, path: [...path, current.length - 1] };
  }
  return { kind: s.kind, path };
}

/**
 * Documents derived from `base` by 1..maxMutations mutations (paths may be limited with
 * `only`, e.g. to leave metadata alone). `base` itself is never modified.
 */
export function mutatedJson<T extends Json>(
  base: T,
  options: { maxMutations?: number; only?: (path: JsonPath) => boolean } = {},
): fc.Arbitrary<MutatedDocument<T>> {
  return fc.array(step, { minLength: 1, maxLength: options.maxMutations ?? 3 }).map((steps) => {
    const value = structuredClone(base) as Json;
    const mutations: Mutation[] = [];
    for (const s of steps) {
      const paths = pathsOf(value).filter((p) => options.only?.(p) ?? true);
      const m = apply(value, s, paths);
      if (m) mutations.push(m);
    }
    return { value: value as T, mutations };
  });
}

/** `a.b[0].c` — how Kubernetes and most validators print a path. */
export function dottedPath(path: JsonPath): string {
  return path.reduce<string>(
    (s, p) => (typeof p === "number" ? `${s}[${p}]` : s === "" ? String(p) : `${s}.${p}`),
    "",
  );
}
