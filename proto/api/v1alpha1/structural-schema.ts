// Translates a TypeBox schema (the one source of every CRD) into the OpenAPI v3
// *structural* schema a CustomResourceDefinition carries. The translation is strict:
// every keyword is either mapped exactly or refused with the path where it appeared, so
// a constraint written in TypeScript can never be silently dropped from the CRD.
import type { TSchema } from "@sinclair/typebox";
import { CrdSchemaError } from "./crd-errors.js";

/** A JSON Schema node as the API server reads it (JSON field names, e.g. `x-kubernetes-validations`). */
export type JsonSchemaProps = { [key: string]: unknown };

// Keywords copied as they are (values are plain data, not sub-schemas).
const SCALAR_KEYWORDS = new Set([
  "type",
  "description",
  "format",
  "default",
  "enum",
  "pattern",
  "minLength",
  "maxLength",
  "minimum",
  "maximum",
  "minItems",
  "maxItems",
  "minProperties",
  "maxProperties",
  "required",
  "x-kubernetes-validations",
  "x-kubernetes-list-type",
  "x-kubernetes-list-map-keys",
  "x-kubernetes-map-type",
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-int-or-string",
  "x-kubernetes-embedded-resource",
]);

function fail(path: string, what: string): never {
  throw new CrdSchemaError(`${path || "<root>"}: ${what}`);
}

/** Strips TypeBox's symbol-keyed metadata by a JSON round trip, then translates. */
export function toStructuralSchema(schema: TSchema): JsonSchemaProps {
  return translate(JSON.parse(JSON.stringify(schema)) as JsonSchemaProps, "");
}

function translate(node: JsonSchemaProps, path: string): JsonSchemaProps {
  // A union of string literals is TypeBox's enum: { anyOf: [{ const, type: "string" }, ...] }.
  if (Array.isArray(node.anyOf)) return translateLiteralUnion(node, path);
  if ("const" in node) {
    const { const: value, ...rest } = node;
    return translate({ ...rest, enum: [value] }, path);
  }

  const out: JsonSchemaProps = {};
  for (const [key, value] of Object.entries(node)) {
    if (SCALAR_KEYWORDS.has(key)) {
      out[key] = value;
    } else if (key === "properties") {
      const props: JsonSchemaProps = {};
      for (const [name, sub] of Object.entries(value as Record<string, JsonSchemaProps>)) {
        props[name] = translate(sub, `${path}.${name}`);
      }
      out.properties = props;
    } else if (key === "items") {
      if (Array.isArray(value)) fail(path, "tuple `items` are not structural; use a single item schema");
      out.items = translate(value as JsonSchemaProps, `${path}[*]`);
    } else if (key === "additionalProperties") {
      // `false` is TypeBox's closed object; Kubernetes prunes unknown fields anyway and
      // forbids `additionalProperties: false` next to `properties`.
      if (value === false) continue;
      if (value === true) fail(path, "`additionalProperties: true` is not structural");
      out.additionalProperties = translate(value as JsonSchemaProps, `${path}[*]`);
    } else if (key === "patternProperties") {
      const entries = Object.entries(value as Record<string, JsonSchemaProps>);
      if (entries.length !== 1) fail(path, "a map needs exactly one key pattern");
      const rules = node["x-kubernetes-validations"] as { rule: string }[] | undefined;
      if (!rules?.some((r) => r.rule.includes("self.all(k"))) {
        fail(path, "a map's key pattern must also be enforced by a CEL rule (use MapOf)");
      }
      out.additionalProperties = translate(entries[0]![1], `${path}[*]`);
    } else if (key === "$id" || key === "title" || key === "examples") {
      continue;
    } else {
      fail(path, `keyword \`${key}\` has no exact structural-schema equivalent`);
    }
  }
  if (out.type === undefined && out["x-kubernetes-preserve-unknown-fields"] !== true) {
    fail(path, "every node of a structural schema needs a `type`");
  }
  // `type` and `description` first: the generated YAML reads like hand-written CRDs.
  const { type, description, ...rest } = out;
  return {
    ...(type !== undefined ? { type } : {}),
    ...(description !== undefined ? { description } : {}),
    ...rest,
  };
}

function translateLiteralUnion(node: JsonSchemaProps, path: string): JsonSchemaProps {
  const options = node.anyOf as JsonSchemaProps[];
  const values = options.map((o, i) => {
    if (!("const" in o) || o.type !== "string")
      fail(`${path}|${i}`, "only unions of string literals are supported");
    return o.const;
  });
  const { anyOf: _anyOf, ...rest } = node;
  return translate({ ...rest, type: "string", enum: values }, path);
}
