// The dependency fences of eslint.config.js, checked by linting imports that cross them:
// each forbidden import must fail `npm run lint`, each allowed one must pass.
import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";

const eslint = new ESLint({ cwd: new URL("../..", import.meta.url).pathname });

async function fenceErrors(filePath: string, specifier: string): Promise<string[]> {
  const [result] = await eslint.lintText(`import "${specifier}";\n`, { filePath });
  return (result?.messages ?? []).filter((m) => m.ruleId === "no-restricted-imports").map((m) => m.message);
}

const forbidden: Array<[string, string, RegExp]> = [
  ["lib/backoff.ts", "../proto/frame-codec.js", /bottom layer/],
  ["proto/frame-codec.ts", "../control-plane/src/main.js", /contracts/],
  ["proto/api/v1alpha1/index.ts", "../../../data-plane/router/src/main.js", /contracts/],
  [
    "data-plane/router/src/main.ts",
    "../../../control-plane/src/main.js",
    /router never imports control-plane/,
  ],
  ["data-plane/router/src/main.ts", "../../agent/src/main.js", /router and agent never import each other/],
  ["data-plane/agent/src/main.ts", "../../router/src/main.js", /router and agent never import each other/],
  [
    "control-plane/src/main.ts",
    "../../data-plane/router/src/main.js",
    /control plane never imports the data plane/,
  ],
  ["cli/src/main.ts", "../../control-plane/src/main.js", /CLI depends on contracts only/],
  ["cli/src/main.ts", "../../data-plane/agent/src/main.js", /CLI depends on contracts only/],
  ["control-plane/src/main.ts", "../../test/env/index.js", /never imports tests/],
  ["cli/src/sdk/index.ts", "../../../test/peers/index.js", /never imports tests/],
  ["data-plane/agent/src/main.ts", "../../../bench/run.js", /never imports tests/],
  // A control-plane feature declares its flags and needs; it never reads the process's options.
  [
    "control-plane/src/queues/queue-split-feature.ts",
    "../control-plane-options.js",
    /feature never imports the process's options/,
  ],
  [
    "control-plane/src/branching/pod/pod-provisioners.ts",
    "../../control-plane.js",
    /feature never imports the process's options/,
  ],
  [
    "control-plane/src/member/member-feature.test.ts",
    "../main.js",
    /feature never imports the process's options/,
  ],
  [
    "control-plane/src/member/member-feature.ts",
    "../../../data-plane/agent/src/agent-server.js",
    /control plane never imports the data plane/,
  ],
  [
    "control-plane/src/credentials/eks-token.ts",
    "../config/cluster-config.js",
    /credentials\/ never imports config\//,
  ],
];

const allowed: Array<[string, string]> = [
  ["cli/src/main.ts", "../../proto/api/v1alpha1/index.js"],
  ["data-plane/router/src/main.ts", "../../../proto/frame-codec.js"],
  ["control-plane/src/main.ts", "../../lib/backoff.js"],
  ["proto/session-auth.ts", "../lib/option-error.js"],
  // The process layer composes the features; features share the runtime's seam.
  ["control-plane/src/control-plane.ts", "./control-plane-options.js"],
  ["control-plane/src/queues/queue-split-feature.ts", "../runtime/index.js"],
  ["control-plane/src/config/cluster-config.ts", "../credentials/credential-source.js"],
  // Unit tests beside product code may use test support.
  ["control-plane/src/main.test.ts", "../../test/env/index.js"],
];

describe("dependency fences", () => {
  it.each(forbidden)("%s may not import %s", async (file, spec, why) => {
    const errors = await fenceErrors(file, spec);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(why);
  });

  it.each(allowed)("%s may import %s", async (file, spec) => {
    expect(await fenceErrors(file, spec)).toEqual([]);
  });
});
