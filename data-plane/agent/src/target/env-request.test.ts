import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { decodePayload, readHeader } from "../../../../proto/frame-codec.js";
import { EnvGetSchema, EnvResultSchema } from "../../../../proto/gen/session_pb.js";
import { answerEnv } from "./env-request.js";
import { TargetView } from "./target-view.js";

const PASSWORD = "Br4nchPassw0rdXYZ";

async function ask(env: Record<string, string>, get: MessageInitShape<typeof EnvGetSchema>) {
  const frames: Buffer[] = [];
  const errors: string[] = [];
  await answerEnv({
    view: new TargetView(undefined, undefined, undefined, {
      env: { env: () => new Map(Object.entries(env)) },
    }),
    get: create(EnvGetSchema, get),
    requestId: 7,
    sessionBranch: undefined,
    countError: (c) => errors.push(c),
    send: (f) => frames.push(f),
  });
  expect(frames).toHaveLength(1);
  expect(readHeader(frames[0]!).requestId).toBe(7);
  return { result: decodePayload(frames[0]!, EnvResultSchema), errors };
}

const rewrite = {
  variable: "DATABASE_URL",
  database: "sy_b",
  user: "sy_b",
  password: PASSWORD,
  host: "127.0.0.1",
  port: 41000,
};

describe("answerEnv with branches", () => {
  it("answers the rewritten variable, the older form applied first", async () => {
    const { result } = await ask(
      { DATABASE_URL: "postgres://app:src@db:5432/app?sslmode=disable", OTHER: "x" },
      { branchVariable: "DATABASE_URL", branch: "ignored-by-the-later-rewrite", branches: [rewrite] },
    );
    expect(result.error).toBe("");
    expect(result.vars).toEqual({
      DATABASE_URL: `postgres://sy_b:${PASSWORD}@127.0.0.1:41000/sy_b?sslmode=disable`,
      OTHER: "x",
    });
  });

  it("checks the branch variable even when the include globs leave it out", async () => {
    const { result, errors } = await ask({ OTHER: "x" }, { include: ["OTHER"], branches: [rewrite] });
    expect(result.vars).toEqual({});
    expect(result.error).toMatch(/^SWITCHYARD_ENV_KEY_NOT_FOUND: the target has no variable DATABASE_URL/);
    expect(errors).toEqual(["SWITCHYARD_ENV_KEY_NOT_FOUND"]);
  });

  it("never puts the password in the error", async () => {
    const { result } = await ask({ DATABASE_URL: "not a url" }, { branches: [rewrite] });
    expect(result.error).toMatch(/^SWITCHYARD_ENV_UNSUPPORTED: DATABASE_URL is not a database URL/);
    expect(result.error).not.toContain(PASSWORD);
  });
});
