import { Type } from "@sinclair/typebox";
import { describe, expect, it } from "vitest";
import { CrdSchemaError } from "./crd-errors.js";
import { MapOf, StringEnum } from "./schema-primitives.js";
import { toStructuralSchema } from "./structural-schema.js";

describe("toStructuralSchema", () => {
  it("turns a union of string literals into an enum", () => {
    expect(toStructuralSchema(StringEnum(["A", "B"] as const, { description: "d", default: "A" }))).toEqual({
      type: "string",
      description: "d",
      default: "A",
      enum: ["A", "B"],
    });
  });

  it("turns a single literal into a one-value enum", () => {
    expect(toStructuralSchema(Type.Literal("x"))).toEqual({ type: "string", enum: ["x"] });
  });

  it("turns a MapOf into additionalProperties and keeps the CEL key rule", () => {
    const out = toStructuralSchema(
      MapOf("^[a-z]+$", Type.Integer({ minimum: 0 }), {
        description: "m",
        maxProperties: 4,
        keyMaxLength: 8,
      }),
    );
    expect(out).toMatchObject({
      type: "object",
      maxProperties: 4,
      additionalProperties: { type: "integer", minimum: 0 },
      "x-kubernetes-validations": [{ rule: 'self.all(k, size(k) <= 8 && k.matches("^[a-z]+$"))' }],
    });
    expect(out).not.toHaveProperty("patternProperties");
  });

  it("drops additionalProperties:false and keeps required from Optional", () => {
    const out = toStructuralSchema(
      Type.Object(
        { a: Type.String({ maxLength: 1 }), b: Type.Optional(Type.Boolean()) },
        { additionalProperties: false },
      ),
    );
    expect(out).toEqual({
      type: "object",
      required: ["a"],
      properties: { a: { type: "string", maxLength: 1 }, b: { type: "boolean" } },
    });
  });

  it.each([
    ["a union of non-literals", Type.Union([Type.String(), Type.Integer()])],
    ["a record without the CEL key rule", Type.Record(Type.String({ pattern: "^a$" }), Type.String())],
    ["additionalProperties: true", Type.Object({}, { additionalProperties: true })],
    ["a node without type", Type.Any()],
    ["a tuple", Type.Tuple([Type.String(), Type.String()])],
    [
      "an intersection",
      Type.Intersect([Type.Object({ a: Type.String() }), Type.Object({ b: Type.String() })]),
    ],
    ["an unsupported keyword", Type.String({ contentEncoding: "base64" })],
  ])("refuses %s instead of loosening the schema", (_what, schema) => {
    const run = () => toStructuralSchema(schema);
    expect(run).toThrow(CrdSchemaError);
    try {
      run();
    } catch (err) {
      expect((err as CrdSchemaError).code).toBe("SWITCHYARD_CRD_SCHEMA_INVALID");
    }
  });

  it("names the path of the offending node", () => {
    const schema = Type.Object({ outer: Type.Object({ inner: Type.Any() }) });
    expect(() => toStructuralSchema(schema)).toThrow(/\.outer\.inner/);
  });
});
